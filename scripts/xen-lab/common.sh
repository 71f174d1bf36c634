# Shared settings and helpers of the Xen lab scripts (sourced, not run).
# Everything comes from Debian packages by name; the cache lives outside the repo.
set -euo pipefail

LAB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$LAB_DIR/../.." && pwd)"
CACHE="${AMPSCHED_XEN_CACHE:-$HOME/.cache/ampsched-xen-lab}"
XEN_SERIES="${AMPSCHED_XEN_SERIES:-4.17}"
PATCH_DIR="$REPO_DIR/xen/patches"
LOCK="${AMPSCHED_REALMACHINE_LOCK:-/tmp/ampsched-realmachine.lock}"

die() { echo "xen-lab: $*" >&2; exit 2; }
note() { echo "xen-lab: $*" >&2; }

# The host tools every lab step needs, with the Debian package providing each.
require_host_tools() {
  local missing=() t
  for t in "qemu-system-x86_64:qemu-system-x86" "cpio:cpio" "flex:flex" "bison:bison" \
           "gcc:gcc" "make:make" "dpkg-deb:dpkg" "apt-get:apt" "python3:python3" "flock:util-linux"; do
    command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t#*:} (for ${t%%:*})")
  done
  [ -x /bin/busybox ] || [ -x /usr/bin/busybox ] || missing+=("busybox-static (for busybox)")
  if [ ${#missing[@]} -gt 0 ]; then
    die "missing host packages: ${missing[*]}; install them with: apt-get install qemu-system-x86 cpio flex bison busybox-static"
  fi
}
