package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The conversion's promises kubeconform relies on: kubeconform's file
// names, strictness where properties are listed, int-or-string accepting
// both, and refs into the shared definitions file.
func TestConvertSwagger(t *testing.T) {
	dir := t.TempDir()
	spec := `{"definitions": {
	  "io.k8s.api.apps.v1.StatefulSet": {
	    "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "StatefulSet"}],
	    "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
	      "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.StatefulSetSpec", "description": "x"}}},
	  "io.k8s.api.apps.v1.StatefulSetSpec": {
	    "properties": {"replicas": {"type": "integer"}, "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
	      "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
	  "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
	  "io.k8s.api.core.v1.Service": {
	    "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Service"}],
	    "properties": {"kind": {"type": "string"}}}
	}}`
	in := filepath.Join(dir, "swagger.json")
	if err := os.WriteFile(in, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if n, err := run(in, nil, out); err != nil || n != 2 {
		t.Fatalf("run = %d, %v; want 2 kinds", n, err)
	}
	for _, f := range []string{"statefulset-apps-v1.json", "service-v1.json", defsFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}

	var sts map[string]any
	read(t, filepath.Join(out, "statefulset-apps-v1.json"), &sts)
	if sts["additionalProperties"] != false {
		t.Errorf("kind schema not strict: %v", sts["additionalProperties"])
	}
	spec0 := sts["properties"].(map[string]any)["spec"].(map[string]any)
	if spec0["$ref"] != defsFile+"#/definitions/io.k8s.api.apps.v1.StatefulSetSpec" || len(spec0) != 1 {
		t.Errorf("spec ref = %v", spec0)
	}
	if e := sts["properties"].(map[string]any)["apiVersion"].(map[string]any)["enum"]; len(e.([]any)) != 1 || e.([]any)[0] != "apps/v1" {
		t.Errorf("apiVersion enum = %v", e)
	}

	var defs struct{ Definitions map[string]map[string]any }
	read(t, filepath.Join(out, defsFile), &defs)
	ss := defs.Definitions["io.k8s.api.apps.v1.StatefulSetSpec"]
	if ss["additionalProperties"] != false {
		t.Errorf("definition not strict")
	}
	labels := ss["properties"].(map[string]any)["labels"].(map[string]any)
	if _, ok := labels["additionalProperties"].(map[string]any); !ok {
		t.Errorf("a map's additionalProperties schema was replaced: %v", labels)
	}
	ios := defs.Definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
	if alts, ok := ios["oneOf"].([]any); !ok || len(alts) != 2 {
		t.Errorf("IntOrString = %v, want oneOf string, integer", ios)
	}
}

func read(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
