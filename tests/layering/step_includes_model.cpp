// A probe that must not compile: the step core (memra_step) sits below the model, so the model's
// headers are not on its include path. tests: Layering.UpwardIncludeDoesNotCompile builds it.
#include "model/config.h"
