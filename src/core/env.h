// On/off switches read from the environment (the NINFER_CUDA_* A/B and fallback switches,
// docs/GPU.md). A value other than the ones listed is an error naming the variable, never a
// silent default.
#pragma once

namespace ninfer {

// `name` unset or empty: `unset_value`; "1": true; "0": false; anything else throws
// ninfer::Error ("NAME must be 0 or 1, got 'VALUE'").
bool env_switch(const char* name, bool unset_value = true);

}  // namespace ninfer
