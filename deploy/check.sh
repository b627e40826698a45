#!/usr/bin/env bash
# Validates what deploy/ ships, offline but for the Go module proxy:
#   * deploy/kubernetes/*.yaml and the Helm chart, rendered with its defaults
#     and with every optional part on, against strict JSON schemas (a
#     misspelt or misplaced field fails) generated from the Kubernetes
#     OpenAPI spec and the prometheus-operator CRDs;
#   * helm lint --strict;
#   * the linux/amd64 binary built by deploy/build-binary.sh, the script the
#     image builds with: static, CGO_ENABLED=0, -trimpath, and it runs.
# With RETAIN_CHECK_IMAGE=1 (and a Docker engine with buildx) it also builds
# the image and runs `retain version` in it.
#
# Tools and schemas are cached in the git-ignored .tools/: the first run
# builds helm from source, which takes minutes (docs/packaging.md).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

kubeconform_version=v0.8.0
helm_version=v4.3.2
# The API version the manifests are checked against, and where its spec
# comes from: k8s.io/kubernetes' api/openapi-spec/swagger.json (a 22 MB
# module zip from the Go proxy).
k8s_version=v1.37.2
# ServiceMonitor and PrometheusRule: the CRDs as JSON in the
# prometheus-operator module (jsonnet/prometheus-operator/*-crd.json; its
# YAML copies would need a YAML parser the stdlib lacks).
promop_version=v0.85.0

tools=$repo/.tools
bin=$tools/bin
mkdir -p "$bin"

# The tools build with the module versions pinned here, not this repo's
# go.mod, and with none of the caller's GOFLAGS.
goenv=(env GOFLAGS= GOWORK=off GOBIN="$bin")

# installed NAME MODULE VERSION: is $bin/NAME built from MODULE@VERSION?
installed() {
  [ -x "$bin/$1" ] && [ "$(go version -m "$bin/$1" 2>/dev/null | awk -v m="$2" '$1 == "mod" && $2 == m { print $3 }')" = "$3" ]
}
if ! installed kubeconform github.com/yannh/kubeconform "$kubeconform_version"; then
  echo "deploy/check: installing kubeconform $kubeconform_version"
  (cd "$tools" && "${goenv[@]}" go install "github.com/yannh/kubeconform/cmd/kubeconform@$kubeconform_version")
fi
if ! installed helm helm.sh/helm/v4 "$helm_version"; then
  echo "deploy/check: installing helm $helm_version (builds from source: several minutes)"
  (cd "$tools" && "${goenv[@]}" go install "helm.sh/helm/v4/cmd/helm@$helm_version")
fi
kubeconform=$bin/kubeconform
helm=$bin/helm

# moddir MODULE@VERSION: download it (outside any module, so no go.mod or
# go.sum here changes) and print where it was extracted.
moddir() {
  (cd "$tools" && GOFLAGS='' GOWORK=off go mod download -json "$1") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'
}

# Regenerated when a version or the converter changes.
schemas=$tools/k8s-schemas/$k8s_version
stamp="$k8s_version $promop_version $(cat internal/tools/k8sschema/*.go | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$schemas/.stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "deploy/check: generating schemas for Kubernetes $k8s_version and prometheus-operator $promop_version"
  k8s=$(moddir "k8s.io/kubernetes@$k8s_version")
  promop=$(moddir "github.com/prometheus-operator/prometheus-operator@$promop_version")
  if [ -z "$k8s" ] || [ -z "$promop" ]; then
    echo "deploy/check: module download failed" >&2; exit 1
  fi
  rm -rf "$schemas.new"
  go run ./internal/tools/k8sschema -out "$schemas.new" \
    -swagger "$k8s/api/openapi-spec/swagger.json" \
    -crd "$promop/jsonnet/prometheus-operator/servicemonitors-crd.json" \
    -crd "$promop/jsonnet/prometheus-operator/prometheusrules-crd.json"
  echo "$stamp" > "$schemas.new/.stamp"
  rm -rf "$schemas" && mv "$schemas.new" "$schemas"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A kind without a schema is an error, not a skip (no
# -ignore-missing-schemas). Kustomization is skipped: it is kustomize's
# input, not an API object, and no spec describes it.
validate() {
  "$kubeconform" -strict -summary -skip Kustomization \
    -kubernetes-version "${k8s_version#v}" \
    -schema-location "$schemas/{{ .ResourceKind }}{{ .KindSuffix }}.json" "$@"
}

echo "deploy/check: deploy/kubernetes"
validate deploy/kubernetes/*.yaml
# kubectl apply -k applies only what the kustomization lists.
for f in deploy/kubernetes/*.yaml; do
  b=$(basename "$f")
  [ "$b" = kustomization.yaml ] && continue
  grep -qx "  - $b" deploy/kubernetes/kustomization.yaml || { echo "deploy/check: $f is not in deploy/kubernetes/kustomization.yaml" >&2; exit 1; }
done

chart=deploy/helm/retain
full=(--set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true
  --set credentials.existingSecret=retain-credentials
  --set serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::111122223333:role/retain
  --set-string podLabels.azure\\.workload\\.identity/use=true)
echo "deploy/check: helm lint"
"$helm" lint --strict "$chart"
"$helm" lint --strict "$chart" "${full[@]}"
echo "deploy/check: the chart, default values"
"$helm" template retain "$chart" > "$work/default.yaml"
validate "$work/default.yaml"
echo "deploy/check: the chart, ServiceMonitor, PrometheusRule and credentials on"
"$helm" template retain "$chart" "${full[@]}" > "$work/full.yaml"
validate "$work/full.yaml"
for kind in ServiceMonitor PrometheusRule; do
  grep -q "^kind: $kind$" "$work/full.yaml" || { echo "deploy/check: the chart rendered no $kind" >&2; exit 1; }
done
grep -q "name: retain-credentials" "$work/full.yaml" || { echo "deploy/check: credentials.existingSecret rendered no envFrom" >&2; exit 1; }

echo "deploy/check: the image's binary (deploy/build-binary.sh linux amd64)"
# shellcheck disable=SC2016 # the Dockerfile's line, verbatim
grep -q 'deploy/build-binary.sh /out/retain "$TARGETOS" "$TARGETARCH"' deploy/Dockerfile ||
  { echo "deploy/check: deploy/Dockerfile no longer builds with deploy/build-binary.sh" >&2; exit 1; }
deploy/build-binary.sh "$work/retain" linux amd64
info=$(go version -m "$work/retain")
for want in 'build	CGO_ENABLED=0' 'build	-trimpath=true' 'build	GOOS=linux' 'build	GOARCH=amd64'; do
  grep -qF "$want" <<<"$info" || { echo "deploy/check: the binary's build info lacks \"$want\":" >&2; echo "$info" | grep -v '	dep	' >&2; exit 1; }
done
# Static: no ELF interpreter and no shared libraries, read with debug/elf
# so CI needs no binutils.
mkdir "$work/elfcheck"
cat > "$work/elfcheck/main.go" <<'EOF'
package main

import (
	"debug/elf"
	"fmt"
	"os"
)

func main() {
	f, err := elf.Open(os.Args[1])
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			fmt.Println("has an ELF interpreter (PT_INTERP): dynamically linked")
			os.Exit(1)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		fmt.Println("needs shared libraries:", libs)
		os.Exit(1)
	}
	fmt.Println("static: no PT_INTERP, no DT_NEEDED")
}
EOF
(cd "$work/elfcheck" && GOFLAGS='' GOWORK=off go run main.go "$work/retain")
if [ "$(go env GOHOSTOS)/$(go env GOHOSTARCH)" = linux/amd64 ]; then
  "$work/retain" version
else
  echo "deploy/check: not on linux/amd64, the binary is not run"
fi

if [ "${RETAIN_CHECK_IMAGE:-0}" = 1 ]; then
  echo "deploy/check: docker build"
  # BuildKit (buildx) is required: RUN --mount, $BUILDPLATFORM and
  # deploy/Dockerfile.dockerignore are BuildKit's.
  docker buildx build --load -f deploy/Dockerfile -t retain:check .
  docker run --rm retain:check version
fi
echo "deploy/check: ok"
