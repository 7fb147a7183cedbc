#include "trainplan/hardware.hpp"

#include <cmath>

namespace trainplan {

std::string GpuSpec::reference_clock_name() const {
    if (sustained_clock_mhz <= 0) return "boost";
    return "the " + std::to_string(static_cast<long>(std::lround(sustained_clock_mhz))) + " MHz its GEMMs settle at under power";
}

double GpuSpec::peak_flops(NumericFormat f) const {
    switch (f) {
        case NumericFormat::FP8: if (fp8_flops > 0) return fp8_flops; [[fallthrough]];
        case NumericFormat::BF16:
            if (bf16_flops > 0) return bf16_flops;
            // No bf16 tensor rate: bf16 GEMMs run on CUDA cores (V100S: 9.85 TFLOP/s bf16
            // vs 13.55 fp32, zzc0721/torch-performance-test-data), so not at the fp16 rate.
            if (fp16_flops > 0 && fp32_flops > 0) return fp32_flops;
            [[fallthrough]];
        case NumericFormat::FP16: if (fp16_flops > 0) return fp16_flops; [[fallthrough]];
        case NumericFormat::TF32: if (tf32_flops > 0) return tf32_flops; [[fallthrough]];
        case NumericFormat::FP32: return fp32_flops;
    }
    return fp32_flops;
}

// to_string(LinkKind): enums.cpp, with its table.

}  // namespace trainplan
