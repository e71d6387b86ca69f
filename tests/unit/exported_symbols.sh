#!/bin/sh
# libcorridorkey_engine.so exports its public API and nothing else: no model/, engine
# internals, I/O, LibTorch module templates or nlohmann JSON symbols; and it holds no dev
# tool (bench, the pipeline / load / reference benches: the CLI's own, ck_devtools) and no
# test hook (the tests' ck_test_hooks), exported or not.
# Usage: exported_symbols.sh LIBRARY
set -u
lib=$1
syms=$(nm -DC --defined-only "$lib") || { echo "FAIL: nm cannot read $lib"; exit 1; }
# The API is there (a vacuous pass would hide a broken nm call or an empty library).
for api in 'corridorkey::v[0-9_]*::create_engine' 'corridorkey::v[0-9_]*::run_inference' \
           'corridorkey::v[0-9_]*::load_profile' 'typeinfo for corridorkey::v[0-9_]*::ConfigError' \
           'corridorkey::v[0-9_]*::Model::load' 'corridorkey::v[0-9_]*::model_key' \
           'corridorkey::v[0-9_]*::image_from_view' 'corridorkey::v[0-9_]*::copy_to_view' \
           'corridorkey::v[0-9_]*::verify_checkpoint' 'corridorkey::v[0-9_]*::convert_checkpoint' \
           'corridorkey::v[0-9_]*::write_frame_output' 'corridorkey::v[0-9_]*::write_layered_output' \
           'corridorkey::v[0-9_]*::display_window(' 'corridorkey::v[0-9_]*::plate_display_window('; do
  echo "$syms" | grep -q "$api" || { echo "FAIL: public symbol matching '$api' is not exported"; exit 1; }
done
leaks=$(echo "$syms" | grep -E 'corridorkey::(v[0-9_]+::)?(model|detail|io|post|config|pipeline|timing|devtools)::|torch::nn::|nlohmann' )
if [ -n "$leaks" ]; then
  echo "FAIL: $(echo "$leaks" | wc -l) internal symbols exported, e.g.:"
  echo "$leaks" | head -20
  exit 1
fi
tools='run_bench|run_pipeline_bench|run_load_bench|bench_engine_options|inject_out_of_memory|inject_trial_delay'
if echo "$syms" | grep -Eq "corridorkey::v[0-9_]+::($tools)\("; then
  echo "FAIL: a dev tool or test hook is exported: $(echo "$syms" | grep -E "($tools)\(" | head -3)"
  exit 1
fi
# Not even as hidden code: the whole symbol table (a stripped library has none to read; then
# this part says so rather than pass on nothing).
all=$(nm -C --defined-only "$lib" 2>/dev/null)
if echo "$all" | grep -q 'corridorkey::model::'; then
  code=$(echo "$all" | grep -E "corridorkey::((v[0-9_]+|detail)::)?($tools)\(|corridorkey::devtools::")
  if [ -n "$code" ]; then
    echo "FAIL: the library holds dev tool or test hook code:"
    echo "$code" | head -10
    exit 1
  fi
  hidden="no dev tools or test hooks inside"
else
  hidden="stripped: dev tools and test hooks checked among the exports only"
fi
echo "exported symbols: $(echo "$syms" | grep -c 'corridorkey::') corridorkey symbols, $hidden, no internals: ok"
