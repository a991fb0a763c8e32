// Builds the model a config describes.
#pragma once

#include "app/config.h"
#include "model/bert.h"

namespace pbert::app {

model::BertOptions ToBertOptions(const ModelConfig& config);

}  // namespace pbert::app
