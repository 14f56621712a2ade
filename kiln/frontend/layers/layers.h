// All of kiln's built-in Keras layers (one include for users; kiln/kiln.h includes it).
#pragma once

#include "kiln/frontend/layers/activations.h"
#include "kiln/frontend/layers/attention.h"
#include "kiln/frontend/layers/conv.h"
#include "kiln/frontend/layers/dense.h"
#include "kiln/frontend/layers/dropout.h"
#include "kiln/frontend/layers/embedding.h"
#include "kiln/frontend/layers/initializers.h"
#include "kiln/frontend/layers/layer.h"
#include "kiln/frontend/layers/masking.h"
#include "kiln/frontend/layers/merging.h"
#include "kiln/frontend/layers/normalization.h"
#include "kiln/frontend/layers/pooling.h"
#include "kiln/frontend/layers/position_embedding.h"
#include "kiln/frontend/layers/recurrent.h"
#include "kiln/frontend/layers/reshaping.h"
#include "kiln/frontend/layers/wrappers.h"
