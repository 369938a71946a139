/* eagervm: the umbrella header — the engine (vm.h), tensors (tensor.h) and
 * their ops (ops.h), autograd (autograd.h), collectives (distributed.h), and
 * the build's configuration (config.h). */
#ifndef EAGERVM_EAGERVM_H
#define EAGERVM_EAGERVM_H

#include "eagervm/vm.h"
#include "eagervm/tensor.h"
#include "eagervm/ops.h"
#include "eagervm/autograd.h"
#include "eagervm/distributed.h"
#include "eagervm/config.h"

#endif
