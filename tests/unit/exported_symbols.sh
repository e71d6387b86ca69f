#!/bin/sh
# libcorridorkey_engine.so exports its public API and nothing else: no model/, engine
# internals, I/O, LibTorch module templates or nlohmann JSON symbols.
# Usage: exported_symbols.sh LIBRARY
set -u
lib=$1
syms=$(nm -DC --defined-only "$lib") || { echo "FAIL: nm cannot read $lib"; exit 1; }
# The API is there (a vacuous pass would hide a broken nm call or an empty library).
for api in 'corridorkey::v[0-9_]*::create_engine' 'corridorkey::v[0-9_]*::run_inference' \
           'corridorkey::v[0-9_]*::load_profile' 'typeinfo for corridorkey::v[0-9_]*::ConfigError' \
           'corridorkey::v[0-9_]*::Model::load' 'corridorkey::v[0-9_]*::model_key' \
           'corridorkey::v[0-9_]*::image_from_view' 'corridorkey::v[0-9_]*::copy_to_view'; do
  echo "$syms" | grep -q "$api" || { echo "FAIL: public symbol matching '$api' is not exported"; exit 1; }
done
leaks=$(echo "$syms" | grep -E 'corridorkey::(v[0-9_]+::)?(model|detail|io|post|config|pipeline|timing)::|torch::nn::|nlohmann' )
if [ -n "$leaks" ]; then
  echo "FAIL: $(echo "$leaks" | wc -l) internal symbols exported, e.g.:"
  echo "$leaks" | head -20
  exit 1
fi
echo "exported symbols: $(echo "$syms" | grep -c 'corridorkey::') corridorkey symbols, no internals: ok"
