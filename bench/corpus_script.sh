# Sourced by the GPU bench scripts: corpus_script NAME prints the path of NAME.py, the first found
# along CORPUS_DIR (folders separated by ':'; by default tests/corpus, then every
# bench/workloads/unseen_* folder), and fails with one line where none holds it.
corpus_script() {
  local dirs dir
  dirs=${CORPUS_DIR:-tests/corpus:$(ls -d bench/workloads/unseen_* 2>/dev/null | tr '\n' ':')}
  IFS=: read -r -a dirs <<< "$dirs"
  for dir in "${dirs[@]}"; do
    [ -n "$dir" ] && [ -f "$dir/$1.py" ] && { echo "$dir/$1.py"; return 0; }
  done
  echo "$1.py: not in any of ${dirs[*]} (CORPUS_DIR)" >&2
  return 1
}
