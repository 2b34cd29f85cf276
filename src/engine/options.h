// The MEMRA_* knobs (common/knobs.h) parsed into the typed options they set, once, at the edge:
// the CLI calls this and then applies its flags; nothing below reads the environment.
#pragma once

#include "engine/engine.h"

namespace memra {

// Every knob's value (its default when unset). Throws memra::Error naming a malformed knob.
EngineOptions engine_options_from_knobs();

}  // namespace memra
