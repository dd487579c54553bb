package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// shareIDPresent replaces the random share UUIDs upstream generates, so that
// answers are deterministic and comparable: only the presence matters.
const shareIDPresent = "<present>"

// allocateRequest is one allocation problem for one node.
type allocateRequest struct {
	// Features are the allocator features (structured.Features; field names
	// match case-insensitively, e.g. "consumableCapacity").
	Features structured.Features          `json:"features"`
	Node     *v1.Node                     `json:"node"`
	Slices   []*resourceapi.ResourceSlice `json:"slices"`
	Classes  []*resourceapi.DeviceClass   `json:"classes"`
	// Claims are allocated together, in this order.
	Claims []*resourceapi.ResourceClaim `json:"claims"`
	// AllocatedClaims already hold devices (status.allocation is read).
	AllocatedClaims []*resourceapi.ResourceClaim `json:"allocatedClaims"`
	// AllocatedDevices are further exclusively allocated devices, as
	// "driver/pool/device".
	AllocatedDevices []deviceRef `json:"allocatedDevices"`
}

type deviceRef struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
}

// classLister serves DeviceClasses from the request.
type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, c := range l {
		out = append(out, c)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if c, ok := l[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// allocatedState folds already-allocated claims into the state the
// scheduler hands to the allocator: exclusive devices, shared device IDs
// (one per share) and the capacity those shares consume. Admin-access
// results do not hold devices.
func allocatedState(req *allocateRequest) structured.AllocatedState {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, d := range req.AllocatedDevices {
		state.AllocatedDevices.Insert(structured.MakeDeviceID(d.Driver, d.Pool, d.Device))
	}
	for _, claim := range req.AllocatedClaims {
		if claim == nil || claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
			if r.ShareID == nil {
				state.AllocatedDevices.Insert(id)
				continue
			}
			state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			if len(r.ConsumedCapacity) > 0 {
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
			}
		}
	}
	return state
}

func handleAllocate(line []byte) (map[string]any, error) {
	var req allocateRequest
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, fmt.Errorf("allocate request: %w", err)
	}
	if req.Node == nil {
		return nil, errors.New("allocate request: node is required")
	}
	for i, c := range req.Claims {
		if c == nil {
			return nil, fmt.Errorf("allocate request: claims[%d] is null", i)
		}
	}
	lister := classLister{}
	for i, c := range req.Classes {
		if c == nil {
			return nil, fmt.Errorf("allocate request: classes[%d] is null", i)
		}
		lister[c.Name] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	celCache := dracel.NewCache(100, dracel.Features{
		EnableConsumableCapacity: req.Features.ConsumableCapacity,
		EnableListTypeAttributes: req.Features.ListTypeAttributes,
	})
	allocator, err := structured.NewAllocator(ctx, req.Features, allocatedState(&req), lister, req.Slices, celCache)
	if err != nil {
		return map[string]any{"outcome": "error", "stage": "new", "error": err.Error()}, nil
	}
	results, err := allocator.Allocate(ctx, req.Node, req.Claims)
	if err != nil {
		return map[string]any{
			"outcome":          "error",
			"stage":            "allocate",
			"error":            err.Error(),
			"failedAllocation": errors.Is(err, structured.ErrFailedAllocationOnNode),
		}, nil
	}
	if len(results) == 0 {
		return map[string]any{"outcome": "unschedulable"}, nil
	}
	present := types.UID(shareIDPresent)
	for i := range results {
		for j := range results[i].Devices.Results {
			if results[i].Devices.Results[j].ShareID != nil {
				results[i].Devices.Results[j].ShareID = &present
			}
		}
	}
	return map[string]any{"outcome": "allocated", "allocations": results}, nil
}
