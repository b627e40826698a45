// Command k8sschema turns Kubernetes' OpenAPI v2 spec (swagger.json) and
// CustomResourceDefinitions (as JSON) into the JSON schemas kubeconform
// reads from a local directory, so deploy/check.sh can validate manifests
// with the network closed.
//
//	go run ./internal/tools/k8sschema -swagger swagger.json [-crd crd.json ...] -out DIR
//
// It writes kubeconform's layout: {kind}-{group}-{version}.json, with group
// the first label of the API group (statefulset-apps-v1.json,
// servicemonitor-monitoring-v1.json), and {kind}-{version}.json for the core
// group (service-v1.json). Kind files refer to the shared
// _definitions.json beside them, which kubeconform resolves relative to the
// kind file, so the 800-odd definitions are written once rather than copied
// into every kind.
//
// The schemas are strict, as openapi2jsonschema --strict makes them: an
// object whose schema lists its properties refuses any other key, so a
// misspelt field fails validation instead of being ignored.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// defsFile is the file kind schemas refer to; kubeconform resolves
// "_definitions.json#/..." against the kind file's own path.
const defsFile = "_definitions.json"

type crdList []string

func (c *crdList) String() string     { return strings.Join(*c, ",") }
func (c *crdList) Set(s string) error { *c = append(*c, s); return nil }

func main() {
	swagger := flag.String("swagger", "", "Kubernetes OpenAPI v2 spec (api/openapi-spec/swagger.json)")
	out := flag.String("out", "", "directory to write the schemas into")
	var crds crdList
	flag.Var(&crds, "crd", "a CustomResourceDefinition as JSON (repeatable)")
	flag.Parse()
	if *out == "" || (*swagger == "" && len(crds) == 0) || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: k8sschema -out DIR [-swagger swagger.json] [-crd crd.json ...]")
		os.Exit(2)
	}
	n, err := run(*swagger, crds, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
	fmt.Printf("k8sschema: wrote %d kind schemas to %s\n", n, *out)
}

func run(swagger string, crds []string, out string) (int, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, err
	}
	n := 0
	if swagger != "" {
		k, err := convertSwagger(swagger, out)
		if err != nil {
			return 0, err
		}
		n += k
	}
	for _, c := range crds {
		k, err := convertCRD(c, out)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", c, err)
		}
		n += k
	}
	return n, nil
}

type gvk struct{ Group, Version, Kind string }

func (g gvk) apiVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

// fileName follows kubeconform's {{ .ResourceKind }}{{ .KindSuffix }}.json.
func (g gvk) fileName() string {
	suffix := ""
	if g.Group != "" {
		suffix = "-" + strings.ToLower(strings.Split(g.Group, ".")[0])
	}
	return strings.ToLower(g.Kind) + suffix + "-" + strings.ToLower(g.Version) + ".json"
}

func convertSwagger(path, out string) (int, error) {
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := readJSON(path, &spec); err != nil {
		return 0, err
	}
	if len(spec.Definitions) == 0 {
		return 0, fmt.Errorf("%s: no definitions: not a Swagger 2.0 spec", path)
	}

	defs := map[string]any{}
	for name, d := range spec.Definitions {
		defs[name] = convert(fixDefinition(name, d), "#/definitions/", false)
	}
	if err := writeJSON(filepath.Join(out, defsFile), map[string]any{"definitions": defs}); err != nil {
		return 0, err
	}

	names := make([]string, 0, len(spec.Definitions))
	for name := range spec.Definitions {
		names = append(names, name)
	}
	sort.Strings(names)
	written := map[string]string{}
	for _, name := range names {
		d := spec.Definitions[name]
		for _, g := range gvks(d) {
			file := g.fileName()
			// A kind served under several definitions (meta's DeleteOptions,
			// WatchEvent) keeps the first: kubeconform has one file per kind.
			if prev, ok := written[file]; ok && prev != name {
				continue
			}
			written[file] = name
			root := convert(fixDefinition(name, d), defsFile+"#/definitions/", false).(map[string]any)
			pinKind(root, g)
			if err := writeJSON(filepath.Join(out, file), root); err != nil {
				return 0, err
			}
		}
	}
	return len(written), nil
}

func gvks(d map[string]any) []gvk {
	raw, _ := d["x-kubernetes-group-version-kind"].([]any)
	var r []gvk
	for _, x := range raw {
		m, _ := x.(map[string]any)
		g, _ := m["group"].(string)
		v, _ := m["version"].(string)
		k, _ := m["kind"].(string)
		if v != "" && k != "" {
			r = append(r, gvk{g, v, k})
		}
	}
	return r
}

// fixDefinition corrects the definitions whose Swagger type is narrower than
// what the API server accepts; the same two openapi2jsonschema corrects.
func fixDefinition(name string, d map[string]any) map[string]any {
	switch name {
	case "io.k8s.apimachinery.pkg.api.resource.Quantity":
		// cpu: 1 is as valid as cpu: "1".
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	}
	return d
}

func convertCRD(path, out string) (int, error) {
	var crd struct {
		Kind string `json:"kind"`
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := readJSON(path, &crd); err != nil {
		return 0, err
	}
	if crd.Kind != "CustomResourceDefinition" {
		return 0, fmt.Errorf("kind %q, want CustomResourceDefinition", crd.Kind)
	}
	n := 0
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		g := gvk{crd.Spec.Group, v.Name, crd.Spec.Names.Kind}
		root := convert(v.Schema.OpenAPIV3Schema, "", false).(map[string]any)
		pinKind(root, g)
		if err := writeJSON(filepath.Join(out, g.fileName()), root); err != nil {
			return 0, err
		}
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("no served version with a schema")
	}
	return n, nil
}

// pinKind makes a document of another kind or apiVersion fail this schema,
// as a kind file is only ever chosen by those two fields.
func pinKind(root map[string]any, g gvk) {
	props, _ := root["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		root["properties"] = props
	}
	props["kind"] = map[string]any{"type": "string", "enum": []any{g.Kind}}
	props["apiVersion"] = map[string]any{"type": "string", "enum": []any{g.apiVersion()}}
	root["required"] = union(root["required"], "kind", "apiVersion")
}

func union(req any, add ...string) []any {
	seen := map[string]bool{}
	var r []any
	list, _ := req.([]any)
	for _, x := range list {
		if s, ok := x.(string); ok && !seen[s] {
			seen[s] = true
			r = append(r, s)
		}
	}
	for _, s := range add {
		if !seen[s] {
			seen[s] = true
			r = append(r, s)
		}
	}
	return r
}

// convert rewrites one schema node for kubeconform (JSON Schema draft 4):
// $refs point at refPrefix, the OpenAPI extensions become what they mean in
// JSON Schema, descriptions go (they are most of the bytes), and objects
// with listed properties refuse other keys. nullable says whether the node
// is a field's value, which Kubernetes accepts as null (meaning unset).
func convert(node any, refPrefix string, nullable bool) any {
	switch n := node.(type) {
	case []any:
		r := make([]any, len(n))
		for i, x := range n {
			r[i] = convert(x, refPrefix, false)
		}
		return r
	case map[string]any:
		return convertObject(n, refPrefix, nullable)
	default:
		return node
	}
}

func convertObject(n map[string]any, refPrefix string, nullable bool) any {
	if ref, ok := n["$ref"].(string); ok {
		// Draft 4 ignores a $ref's siblings, as Swagger does.
		return map[string]any{"$ref": refPrefix + strings.TrimPrefix(ref, "#/definitions/")}
	}
	if n["format"] == "int-or-string" || n["x-kubernetes-int-or-string"] == true {
		alts := []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}
		if nullable {
			alts = append(alts, map[string]any{"type": "null"})
		}
		return map[string]any{"oneOf": alts}
	}
	r := map[string]any{}
	for k, v := range n {
		switch {
		case strings.HasPrefix(k, "x-"), k == "description", k == "nullable":
			// Extensions and prose mean nothing to a draft 4 validator.
		case k == "properties":
			props, _ := v.(map[string]any)
			out := make(map[string]any, len(props))
			for name, p := range props {
				out[name] = convert(p, refPrefix, true)
			}
			r[k] = out
		case k == "additionalProperties" || k == "items" || k == "not":
			if b, ok := v.(bool); ok {
				r[k] = b
			} else {
				r[k] = convert(v, refPrefix, false)
			}
		case k == "allOf" || k == "anyOf" || k == "oneOf":
			r[k] = convert(v, refPrefix, false)
		default:
			r[k] = v
		}
	}
	_, hasProps := n["properties"]
	_, hasAdditional := n["additionalProperties"]
	if hasProps && !hasAdditional && n["x-kubernetes-preserve-unknown-fields"] != true {
		r["additionalProperties"] = false
	}
	if t, ok := r["type"].(string); ok && (nullable || n["nullable"] == true) {
		r["type"] = []any{t, "null"}
	}
	return r
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
