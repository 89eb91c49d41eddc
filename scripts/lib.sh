# Shared by scripts/up.sh and scripts/test.sh (sourced, not run).

# Runs a command as root: directly when we are root, else through sudo.
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Installs Debian package $2 unless command $1 already works.
ensure_debian_package() {
  local probe="$1" package="$2"
  if ! bash -c "$probe" >/dev/null 2>&1; then
    echo "==> installing $package (Debian package)"
    as_root apt-get update -qq
    as_root apt-get install -y -qq "$package"
  fi
}
