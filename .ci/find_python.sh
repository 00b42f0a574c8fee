# Sourced by .ci/docs.sh and .ci/package.sh: find_python prints $PYTHON, else a working
# CPython >= 3.11 (python3.11 first, as .ci/run does).
find_python() {
  local c root
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  if [ -n "${PYTHON:-}" ]; then set -- "$PYTHON"
  else set -- python3.11 "$root"/versions/3.11.*/bin/python3.11 /usr/bin/python3.11 python3; fi
  for c in "$@"; do
    if "$c" -c 'import sys; assert sys.version_info >= (3, 11)' >/dev/null 2>&1; then
      echo "$c"; return 0
    fi
  done
  echo "no Python >= 3.11 found (set PYTHON)" >&2; return 1
}
