package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// manifestObject is the first document of a YAML or JSON manifest as a
// controller decodes it after `kubectl apply`: kubectl reads the stream (JSON
// when it starts with '{', else YAML converted by sigs.k8s.io/yaml), decodes
// the document as unstructured data (without checking kind), and sends it re-encoded as JSON; the API
// server's JSON is then decoded with unstructured numbers (int64 when
// integral, else float64).
func manifestObject(text string) (any, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(text)), 4096)
	var ext runtime.RawExtension
	if err := dec.Decode(&ext); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(ext.Raw, &obj); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	sent, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	d := json.NewDecoder(bytes.NewReader(sent))
	d.UseNumber()
	var object any
	if err := d.Decode(&object); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return unstructuredNumbers(object)
}
