#!/usr/bin/env bash
# Compiles the Rego policy (policies/*.rego except *_test.rego, plus policies/data.json) into the
# wasm bundle policy-bundle/bundle.tar.gz that the product loads in-process, after checking and
# unit-testing the Rego. Also writes policy-bundle/bundle.sources.sha256 (sha256sum format: one line
# per source file, sorted) so a stale bundle is detectable without opa:
# `cd policies && sha256sum -c ../policy-bundle/bundle.sources.sha256`, and bundleDrift.test.ts.
# The bundle revision (.manifest) is the sha256 of that file.
# The bundle lives outside policies/ on purpose: OPA's loader reads any *.tar.gz inside a directory
# it is given, so a bundle there would clash with data.json in `opa test|eval|run policies/`.
# Needs the opa binary: $AMF_OPA_BIN, opa on PATH, ~/go/bin/opa or ~/.local/bin/opa
# (go install github.com/open-policy-agent/opa@v1.10.1).
set -euo pipefail
cd "$(dirname "$0")/.."

opa="${AMF_OPA_BIN:-}"
if [ -z "$opa" ]; then
  for candidate in "$(command -v opa || true)" "${GOPATH:-$HOME/go}/bin/opa" "$HOME/go/bin/opa" "$HOME/.local/bin/opa"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then opa="$candidate"; break; fi
  done
fi
if [ -z "$opa" ] || [ ! -x "$opa" ]; then
  echo "build-policy: opa not found; install it: go install github.com/open-policy-agent/opa@v1.10.1" >&2
  exit 1
fi

# Same selection as listPolicySources() in src/policy/opaBuild.ts: bytewise-sorted relative paths.
mapfile -t sources < <(cd policies && find . -mindepth 1 -name '.*' -prune -o -type f \
  \( \( -name '*.rego' ! -name '*_test.rego' \) -o -name data.json \) -print | sed 's|^\./||' | LC_ALL=C sort)
if [ "${#sources[@]}" -eq 0 ]; then echo "build-policy: no policy sources in policies/" >&2; exit 1; fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
for f in "${sources[@]}"; do
  mkdir -p "$work/src/$(dirname "$f")"
  cp "policies/$f" "$work/src/$f"
done
(cd policies && sha256sum -- "${sources[@]}") >"$work/sources.sha256"
revision="$(sha256sum <"$work/sources.sha256" | cut -c1-64)"

echo "==> opa $("$opa" version | sed -n 's/^Version: //p'): check and test policies/"
"$opa" check --strict "$work/src"
"$opa" test policies/

echo "==> opa build -t wasm (revision ${revision:0:12})"
# Built from inside the staging directory so the bundle's paths are /admission.rego, not /tmp/...
(cd "$work/src" && "$opa" build -t wasm -e amf/admission/decision -e amf/delegation/decision -e amf/mcp/decision \
  --revision "$revision" -o "$work/bundle.tar.gz" .)

mkdir -p policy-bundle
mv "$work/bundle.tar.gz" policy-bundle/bundle.tar.gz
cp "$work/sources.sha256" policy-bundle/bundle.sources.sha256
echo "==> wrote policy-bundle/bundle.tar.gz and policy-bundle/bundle.sources.sha256"
