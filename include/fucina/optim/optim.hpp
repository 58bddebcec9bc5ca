#pragma once
// Umbrella header for the optimizers.
#include "fucina/optim/adamw.hpp"
#include "fucina/optim/apollo.hpp"
#include "fucina/optim/checkpoint.hpp"
#include "fucina/optim/clip.hpp"
#include "fucina/optim/muon.hpp"
#include "fucina/optim/optimizer.hpp"
#include "fucina/optim/param.hpp"
#include "fucina/optim/schedule.hpp"
#include "fucina/optim/sgd.hpp"
#include "fucina/optim/state.hpp"
