// Precompiled header for translation units that use LibTorch. The ATen and nn headers
// dominate compile time (~25 s per TU on 2 cores); parsed once here instead of per TU.
#pragma once
#include <ATen/ATen.h>
#include <torch/nn/functional.h>
#include <torch/nn/module.h>
#include <torch/nn/modules.h>
#include <torch/types.h>
