#!/usr/bin/env bash
# Builds the Strategist trainer image (GPU and/or CPU variant of containers/Dockerfile)
# with whichever engine works here: docker with a running daemon, podman, or buildah.
#
#   containers/build.sh [--variant gpu|cpu|all] [--tag NAME:TAG] [--push]
#
# The GPU variant is tagged NAME:TAG, the CPU variant NAME:TAG-cpu. ENGINE=docker|podman|buildah
# forces an engine. Exits 3 when no engine can build, saying what to do instead.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
tag="${IMAGE:-strategist-trainer:dev}"
variant="all"
push=0

usage() { sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --variant) variant="${2:?--variant needs gpu, cpu or all}"; shift 2 ;;
    --tag) tag="${2:?--tag needs NAME:TAG}"; shift 2 ;;
    --push) push=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "build.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
case "$variant" in
  gpu|cpu|all) ;;
  *) echo "build.sh: --variant must be gpu, cpu or all, got $variant" >&2; exit 2 ;;
esac

# An engine counts only when it can build: docker needs a daemon that answers.
works() {
  case "$1" in
    docker) command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 ;;
    podman) command -v podman >/dev/null 2>&1 && podman info >/dev/null 2>&1 ;;
    buildah) command -v buildah >/dev/null 2>&1 && buildah version >/dev/null 2>&1 ;;
    *) return 1 ;;
  esac
}

engine="${ENGINE:-}"
if [ -n "$engine" ]; then
  if ! works "$engine"; then
    echo "build.sh: ENGINE=$engine cannot build here (not installed, or no daemon)" >&2
    exit 3
  fi
else
  for candidate in docker podman buildah; do
    if works "$candidate"; then engine="$candidate"; break; fi
  done
fi
if [ -z "$engine" ]; then
  {
    echo "build.sh: no container engine can build here:"
    if command -v docker >/dev/null 2>&1; then
      echo "  docker: client found, but no daemon answers (docker info failed)"
    else
      echo "  docker: not installed"
    fi
    command -v podman >/dev/null 2>&1 || echo "  podman: not installed"
    command -v buildah >/dev/null 2>&1 || echo "  buildah: not installed"
    echo "Start the Docker daemon, install podman or buildah (apt-get install podman), or build"
    echo "in Cloud Build: gcloud builds submit --config containers/cloudbuild.yaml \\"
    echo "  --substitutions=_IMAGE=REGION-docker.pkg.dev/PROJECT/REPO/strategist-trainer ."
  } >&2
  exit 3
fi

build() {  # build VARIANT_TAG BASE_IMAGE REDUCTION_SERVER(1|0)
  local image="$1" base="$2" reduction_server="$3"
  echo "build.sh: $engine building $image (FROM $base)"
  local args=(--build-arg "BASE_IMAGE=$base" --build-arg "REDUCTION_SERVER=$reduction_server")
  case "$engine" in
    docker)
      DOCKER_BUILDKIT=1 docker build -f "$here/Dockerfile" "${args[@]}" -t "$image" "$root" ;;
    podman)
      podman build -f "$here/Dockerfile" --ignorefile "$here/Dockerfile.dockerignore" \
        "${args[@]}" -t "$image" "$root" ;;
    buildah)
      buildah build -f "$here/Dockerfile" --ignorefile "$here/Dockerfile.dockerignore" \
        "${args[@]}" -t "$image" "$root" ;;
  esac
  if [ "$push" = 1 ]; then
    echo "build.sh: pushing $image"
    "$engine" push "$image"
  fi
}

if [ "$variant" = gpu ] || [ "$variant" = all ]; then
  build "$tag" "tensorflow/tensorflow:2.21.0-gpu" 1
fi
if [ "$variant" = cpu ] || [ "$variant" = all ]; then
  build "$tag-cpu" "python:3.11-slim" 0
fi
echo "build.sh: done"
