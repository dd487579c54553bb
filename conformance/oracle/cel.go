package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/library"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// celRequest asks for one expression to be compiled and evaluated.
//
// Env "object" (the default) declares `object` as dyn in the
// ValidatingAdmissionPolicy base environment at compatibility version
// 1.37 (new expressions), with the per-call cost limit the base environment
// sets (celconfig.PerCallLimit). Env "device" uses the DRA selector compiler
// of k8s.io/dynamic-resource-allocation/cel exactly as the scheduler does
// (DeviceMatches), with CELSelectorExpressionMaxCost as the limit.
type celRequest struct {
	Env        string          `json:"env"`
	Expression string          `json:"expression"`
	Object     json.RawMessage `json:"object"`
	Device     *deviceInput    `json:"device"`
	// Manifest, when set, is a YAML or JSON manifest whose first document,
	// read as kubectl and the API server read it, is bound to `object`.
	Manifest *string `json:"manifest"`
	// CostLimit overrides the runtime cost limit when set.
	CostLimit *uint64 `json:"costLimit"`
	// Features of the DRA CEL environment (env "device" only).
	ConsumableCapacity bool `json:"consumableCapacity"`
	ListTypeAttributes bool `json:"listTypeAttributes"`
}

// deviceInput is a device as published in a ResourceSlice, plus its driver.
type deviceInput struct {
	Driver                   string                                                    `json:"driver"`
	AllowMultipleAllocations *bool                                                     `json:"allowMultipleAllocations"`
	Attributes               map[resourceapi.QualifiedName]resourceapi.DeviceAttribute `json:"attributes"`
	Capacity                 map[resourceapi.QualifiedName]resourceapi.DeviceCapacity  `json:"capacity"`
}

// compatibilityVersion is the Kubernetes version whose CEL environment the
// "object" expressions are compiled in.
var compatibilityVersion = version.MajorMinor(1, 37)

var (
	objectEnvOnce sync.Once
	objectEnv     *cel.Env
	objectEnvErr  error
)

// objectEnvironment builds the VAP-like environment once: the Kubernetes base
// environment plus `object` declared as dyn, with strict cost accounting as
// the admission plugin uses.
func objectEnvironment() (*cel.Env, error) {
	objectEnvOnce.Do(func() {
		base := environment.MustBaseEnvSet(compatibilityVersion)
		extended, err := base.Extend(
			environment.VersionedOptions{
				IntroducedVersion: version.MajorMinor(1, 0),
				EnvOptions:        []cel.EnvOption{cel.Variable("object", cel.DynType)},
			},
			environment.StrictCostOpt,
		)
		if err != nil {
			objectEnvErr = err
			return
		}
		objectEnv, objectEnvErr = extended.Env(environment.NewExpressions)
	})
	return objectEnv, objectEnvErr
}

func handleCEL(line []byte) (map[string]any, error) {
	var req celRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, fmt.Errorf("cel request: %w", err)
	}
	switch req.Env {
	case "", "object":
		return celObject(&req)
	case "device":
		return celDevice(&req)
	default:
		return nil, fmt.Errorf("cel request: unknown env %q (want object or device)", req.Env)
	}
}

func errorAnswer(class, message string) map[string]any {
	return map[string]any{"error": map[string]any{"class": class, "message": message}}
}

// classifyEvalError tells a cost-limit cancellation from other runtime errors.
func classifyEvalError(err error) string {
	if strings.Contains(err.Error(), "actual cost limit exceeded") {
		return "cost"
	}
	return "runtime"
}

func celObject(req *celRequest) (map[string]any, error) {
	env, err := objectEnvironment()
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	var object any
	if req.Manifest != nil {
		if object, err = manifestObject(*req.Manifest); err != nil {
			return errorAnswer("manifest", err.Error()), nil
		}
	} else if len(req.Object) > 0 {
		dec := json.NewDecoder(bytes.NewReader(req.Object))
		dec.UseNumber()
		if err := dec.Decode(&object); err != nil {
			return nil, fmt.Errorf("cel request: object: %w", err)
		}
		object, err = unstructuredNumbers(object)
		if err != nil {
			return nil, fmt.Errorf("cel request: object: %w", err)
		}
	}
	ast, issues := env.Compile(req.Expression)
	if issues != nil && issues.Err() != nil {
		return errorAnswer("compile", issues.Err().Error()), nil
	}
	answer := map[string]any{"outputType": ast.OutputType().String()}
	estimate, estErr := env.EstimateCost(ast, &library.CostEstimator{})
	if estErr != nil {
		answer["estimateError"] = estErr.Error()
	} else {
		answer["estimate"] = map[string]any{"min": estimate.Min, "max": estimate.Max}
	}
	limit := uint64(celconfig.PerCallLimit)
	if req.CostLimit != nil {
		limit = *req.CostLimit
	}
	prog, err := env.Program(ast, cel.CostLimit(limit), cel.InterruptCheckFrequency(celconfig.CheckFrequency))
	if err != nil {
		return errorAnswer("compile", "program instantiation failed: "+err.Error()), nil
	}
	val, details, evalErr := prog.Eval(map[string]any{"object": object})
	if cost := details.ActualCost(); cost != nil {
		answer["cost"] = *cost
	}
	if evalErr != nil {
		answer["error"] = map[string]any{"class": classifyEvalError(evalErr), "message": evalErr.Error()}
		return answer, nil
	}
	tagged, err := tagValue(val)
	if err != nil {
		answer["error"] = map[string]any{"class": "runtime", "message": "result: " + err.Error()}
		return answer, nil
	}
	answer["value"] = tagged
	return answer, nil
}

func celDevice(req *celRequest) (map[string]any, error) {
	if req.Device == nil {
		return nil, errors.New("cel request: env device needs a device")
	}
	compiler := dracel.GetCompiler(dracel.Features{
		EnableConsumableCapacity: req.ConsumableCapacity,
		EnableListTypeAttributes: req.ListTypeAttributes,
	})
	result := compiler.CompileCELExpression(req.Expression, dracel.Options{CostLimit: req.CostLimit})
	if result.Error != nil {
		class := "compile"
		if result.Error.Type == apiservercel.ErrorTypeInternal && result.Program != nil {
			// Compiled, but the estimator failed: report and keep going.
			class = "internal"
		}
		return errorAnswer(class, result.Error.Error()), nil
	}
	answer := map[string]any{"outputType": result.OutputType.String()}
	if result.MaxCost != math.MaxUint64 {
		answer["estimate"] = map[string]any{"min": nil, "max": result.MaxCost}
	} else {
		answer["estimate"] = map[string]any{"min": nil, "max": uint64(math.MaxUint64)}
	}
	matches, details, err := result.DeviceMatches(context.Background(), dracel.Device{
		Driver:                   req.Device.Driver,
		AllowMultipleAllocations: req.Device.AllowMultipleAllocations,
		Attributes:               req.Device.Attributes,
		Capacity:                 req.Device.Capacity,
	})
	if cost := details.ActualCost(); cost != nil {
		answer["cost"] = *cost
	}
	if err != nil {
		answer["error"] = map[string]any{"class": classifyEvalError(err), "message": err.Error()}
		return answer, nil
	}
	answer["value"] = map[string]any{"t": "bool", "v": matches}
	return answer, nil
}

// unstructuredNumbers converts json.Number the way Kubernetes decodes
// unstructured JSON: integers as int64, everything else as float64.
func unstructuredNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("number %s: %w", x, err)
		}
		return f, nil
	case map[string]any:
		for k, e := range x {
			c, err := unstructuredNumbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
		return x, nil
	case []any:
		for i, e := range x {
			c, err := unstructuredNumbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	default:
		return v, nil
	}
}

// tagValue renders a CEL value as JSON with its type: {"t": type, "v": value}.
// Integers are strings (no float rounding on the reader's side), doubles use
// Go's shortest round-trip form, bytes are base64, map entries are sorted by
// their rendered key so the answer is deterministic.
func tagValue(val ref.Val) (map[string]any, error) {
	switch v := val.(type) {
	case types.Null:
		return map[string]any{"t": "null_type", "v": nil}, nil
	case types.Bool:
		return map[string]any{"t": "bool", "v": bool(v)}, nil
	case types.Int:
		return map[string]any{"t": "int", "v": strconv.FormatInt(int64(v), 10)}, nil
	case types.Uint:
		return map[string]any{"t": "uint", "v": strconv.FormatUint(uint64(v), 10)}, nil
	case types.Double:
		return map[string]any{"t": "double", "v": formatDouble(float64(v))}, nil
	case types.String:
		return map[string]any{"t": "string", "v": string(v)}, nil
	case types.Bytes:
		return map[string]any{"t": "bytes", "v": base64.StdEncoding.EncodeToString([]byte(v))}, nil
	case types.Timestamp:
		return map[string]any{"t": "google.protobuf.Timestamp", "v": v.String()}, nil
	case types.Duration:
		return map[string]any{"t": "google.protobuf.Duration", "v": v.String()}, nil
	case *types.Optional:
		if !v.HasValue() {
			return map[string]any{"t": "optional_type", "v": nil}, nil
		}
		inner, err := tagValue(v.GetValue())
		if err != nil {
			return nil, err
		}
		return map[string]any{"t": "optional_type", "v": inner}, nil
	case *types.Err:
		return nil, v
	case apiservercel.Quantity:
		return map[string]any{"t": "kubernetes.Quantity", "v": v.Quantity.String()}, nil
	case apiservercel.Semver:
		return map[string]any{"t": "kubernetes.Semver", "v": v.Version.String()}, nil
	case apiservercel.IP:
		return map[string]any{"t": "net.IP", "v": v.Addr.String()}, nil
	case apiservercel.CIDR:
		return map[string]any{"t": "net.CIDR", "v": v.Prefix.String()}, nil
	case apiservercel.URL:
		return map[string]any{"t": "kubernetes.URL", "v": v.URL.String()}, nil
	case ref.Type:
		return map[string]any{"t": "type", "v": v.TypeName()}, nil
	case traits.Mapper:
		return tagMap(v)
	case traits.Lister:
		items := []any{}
		for it := v.Iterator(); it.HasNext() == types.True; {
			e, err := tagValue(it.Next())
			if err != nil {
				return nil, err
			}
			items = append(items, e)
		}
		return map[string]any{"t": "list", "v": items}, nil
	}
	return map[string]any{"t": val.Type().TypeName(), "v": fmt.Sprintf("%v", val.Value())}, nil
}

func tagMap(m traits.Mapper) (map[string]any, error) {
	type entry struct {
		sortKey string
		pair    []any
	}
	var entries []entry
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		tk, err := tagValue(k)
		if err != nil {
			return nil, err
		}
		tv, err := tagValue(m.Get(k))
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(tk)
		if err != nil {
			return nil, err
		}
		entries = append(entries, entry{string(raw), []any{tk, tv}})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].sortKey < entries[j].sortKey })
	pairs := make([]any, 0, len(entries))
	for _, e := range entries {
		pairs = append(pairs, e.pair)
	}
	return map[string]any{"t": "map", "v": pairs}, nil
}

func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
