package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
)

// placementProfile is kube-scheduler's default profile (defaults applied by the
// v1 configuration scheme, so plugin order, weights and arguments are
// upstream's) without the plugins that read objects a placement request does
// not carry: volumes, images, DRA, workloads, scheduling gates. Preemption is a
// PostFilter and never runs here. PodTopologySpread gets no cluster-default
// constraints (defaultingType List with none), as dra-affinity applies none.
const placementProfile = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: oracle
  plugins:
    multiPoint:
      disabled:
      - name: SchedulingGates
      - name: VolumeRestrictions
      - name: NodeVolumeLimits
      - name: VolumeBinding
      - name: VolumeZone
      - name: ImageLocality
      - name: DefaultPreemption
      - name: DynamicResources
      - name: NodeDeclaredFeatures
      - name: GangScheduling
      - name: TopologyPlacementGenerator
      - name: PodGroupPodsCount
      - name: DeferredPodScheduling
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
`

// placementRequest is one scheduling problem: the cluster as the scheduler's
// snapshot holds it, and the pod to place.
type placementRequest struct {
	Nodes      []*v1.Node      `json:"nodes"`
	Pods       []*v1.Pod       `json:"pods"` // bound pods (spec.nodeName set)
	Namespaces []*v1.Namespace `json:"namespaces"`
	Pod        *v1.Pod         `json:"pod"`
}

type rejection struct {
	Plugin  string   `json:"plugin"`
	Code    string   `json:"code"`
	Reasons []string `json:"reasons"`
}

func loadPlacementProfile() (*schedulerapi.KubeSchedulerProfile, error) {
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode([]byte(placementProfile), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding the profile: %w", err)
	}
	cfg, ok := obj.(*schedulerapi.KubeSchedulerConfiguration)
	if !ok || len(cfg.Profiles) != 1 {
		return nil, fmt.Errorf("decoding the profile: unexpected %T", obj)
	}
	return &cfg.Profiles[0], nil
}

// handlePlacement runs upstream's PreFilter and Filter plugins on every node,
// then PreScore and Score on the feasible ones, as one scheduling cycle does
// (schedule_one.go), and answers the feasible nodes, each rejected node's
// first failing plugin with its reasons, and each feasible node's normalized
// score per plugin (the weighted score divided by the plugin's weight).
func handlePlacement(line []byte) (map[string]any, error) {
	var req struct {
		placementRequest
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, fmt.Errorf("decoding placement request: %w", err)
	}
	if req.Pod == nil {
		return nil, fmt.Errorf("placement request without pod")
	}
	for i, n := range req.Nodes {
		if n == nil {
			return nil, fmt.Errorf("nodes[%d] is null", i)
		}
	}
	for i, p := range req.Pods {
		if p == nil || p.Spec.NodeName == "" {
			return nil, fmt.Errorf("pods[%d] is null or not bound (spec.nodeName)", i)
		}
	}
	for i, ns := range req.Namespaces {
		if ns == nil {
			return nil, fmt.Errorf("namespaces[%d] is null", i)
		}
	}
	// The framework records its metrics into the scheduler's registry (as a
	// running kube-scheduler does); made once per process.
	schedmetrics.Register()
	profile, err := loadPlacementProfile()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	client := clientsetfake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	nsIndexer := factory.Core().V1().Namespaces().Informer().GetIndexer()
	for _, ns := range req.Namespaces {
		if err := nsIndexer.Add(ns); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	snapshot := schedcache.NewSnapshot(req.Pods, req.Nodes)
	f, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), profile,
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithParallelism(1))
	if err != nil {
		return nil, fmt.Errorf("building the framework: %w", err)
	}
	defer func() { _ = f.Close() }()

	weights := map[string]int32{}
	for _, p := range f.ListPlugins().Score.Enabled {
		weights[p.Name] = p.Weight
	}
	var filterPlugins []string
	for _, p := range f.ListPlugins().Filter.Enabled {
		filterPlugins = append(filterPlugins, p.Name)
	}

	pod := req.Pod
	state := framework.NewCycleState()
	nodeInfos, err := snapshot.NodeInfos().List()
	if err != nil {
		return nil, err
	}
	sort.Slice(nodeInfos, func(i, j int) bool { return nodeInfos[i].Node().Name < nodeInfos[j].Node().Name })

	rejected := map[string]rejection{}
	feasible := []fwk.NodeInfo{}
	preResult, preStatus, _ := f.RunPreFilterPlugins(ctx, state, pod)
	if !preStatus.IsSuccess() && !preStatus.IsRejected() {
		return nil, fmt.Errorf("PreFilter: %w", preStatus.AsError())
	}
	for _, ni := range nodeInfos {
		name := ni.Node().Name
		var st *fwk.Status
		switch {
		case !preStatus.IsSuccess():
			st = preStatus
		case !preResult.AllNodes() && !preResult.NodeNames.Has(name):
			st = fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) of PreFilter")
			st.SetPlugin("PreFilterResult")
		default:
			st = f.RunFilterPlugins(ctx, state, pod, ni)
		}
		if st.IsSuccess() {
			feasible = append(feasible, ni)
			continue
		}
		if !st.IsRejected() {
			return nil, fmt.Errorf("Filter on node %s: %w", name, st.AsError())
		}
		rejected[name] = rejection{Plugin: st.Plugin(), Code: st.Code().String(), Reasons: st.Reasons()}
	}

	scores := map[string]map[string]int64{}
	if len(feasible) > 0 {
		if st := f.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
			return nil, fmt.Errorf("PreScore: %w", st.AsError())
		}
		nodeScores, st := f.RunScorePlugins(ctx, state, pod, feasible)
		if !st.IsSuccess() {
			return nil, fmt.Errorf("Score: %w", st.AsError())
		}
		for _, ns := range nodeScores {
			per := map[string]int64{}
			for _, s := range ns.Scores {
				w := int64(weights[s.Name])
				if w == 0 {
					w = 1
				}
				per[s.Name] = s.Score / w
			}
			scores[ns.Name] = per
		}
	}
	names := make([]string, 0, len(feasible))
	for _, ni := range feasible {
		names = append(names, ni.Node().Name)
	}
	skipped := state.GetSkipScorePlugins()
	return map[string]any{
		"feasible":      names,
		"rejected":      rejected,
		"scores":        scores,
		"weights":       weights,
		"filterPlugins": filterPlugins,
		"skippedScores": sortedKeys(skipped),
		"preFilterCode": preStatus.Code().String(),
	}, nil
}

func sortedKeys(s sets.Set[string]) []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
