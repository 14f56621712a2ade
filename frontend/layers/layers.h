// All of kiln's built-in Keras layers (one include for users; kiln/kiln.h includes it).
#pragma once

#include "frontend/layers/activations.h"
#include "frontend/layers/attention.h"
#include "frontend/layers/conv.h"
#include "frontend/layers/dense.h"
#include "frontend/layers/dropout.h"
#include "frontend/layers/embedding.h"
#include "frontend/layers/initializers.h"
#include "frontend/layers/layer.h"
#include "frontend/layers/masking.h"
#include "frontend/layers/merging.h"
#include "frontend/layers/normalization.h"
#include "frontend/layers/pooling.h"
#include "frontend/layers/position_embedding.h"
#include "frontend/layers/recurrent.h"
#include "frontend/layers/reshaping.h"
#include "frontend/layers/wrappers.h"
