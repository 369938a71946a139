"""The Optimizer base class of eagervm.optim, as torch.optim.Optimizer.

Parameters are eagervm Tensors (leaves of the autograd graph); their
gradients are read from ``p.grad`` (None: the parameter is skipped).
param_groups, defaults, state, add_param_group, zero_grad, state_dict and
load_state_dict follow PyTorch's names and semantics. A step issues one fused
instruction per group (eagervm._C._sgd_update_multi_, _adam_update_multi_) or
per parameter (_sgd_update_, _adam_update_) and never waits for a result.
"""
import warnings
from collections.abc import MutableMapping
from copy import deepcopy
from itertools import chain

from .. import _C
from ..autograd import enable_grad, no_grad

__all__ = ["Optimizer", "required"]


class _RequiredParameter:
    """The default of a hyperparameter that every group must give."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class _TensorKeyedState(MutableMapping):
    """``Optimizer.state``: per-parameter dicts keyed by the parameter itself.

    eagervm Tensors are not hashable (``==`` is elementwise, as in NumPy), so
    entries are found by identity, as PyTorch's tensors hash: by id, the
    entry holding the tensor (so the id stays its own). A missing parameter
    gets a new empty dict on first lookup, as a defaultdict(dict). Non-tensor
    keys (state that belongs to no parameter) are kept by value.
    """

    def __init__(self, items=()):
        self._d = {}  # id(tensor) or ("value", key) -> (key, value)
        for k, v in items:
            self[k] = v

    @staticmethod
    def _key(k):
        return id(k) if isinstance(k, _C.Tensor) else ("value", k)

    def _of(self, p):
        """The state dict of parameter p, created empty (the steps' path)."""
        e = self._d.get(id(p))
        if e is None:
            e = self._d[id(p)] = (p, {})
        return e[1]

    def __getitem__(self, k):
        key = self._key(k)
        e = self._d.get(key)
        if e is None:
            e = self._d[key] = (k, {})
        return e[1]

    def __setitem__(self, k, v):
        self._d[self._key(k)] = (k, v)

    def __delitem__(self, k):
        del self._d[self._key(k)]

    def __contains__(self, k):
        return self._key(k) in self._d

    def __iter__(self):
        return (k for k, _ in self._d.values())

    def __len__(self):
        return len(self._d)

    def get(self, k, default=None):
        item = self._d.get(self._key(k))
        return default if item is None else item[1]

    def __repr__(self):
        return "{" + ", ".join(f"{_short(k)}: {v!r}" for k, v in self._d.values()) + "}"


def _short(k):
    if isinstance(k, _C.Tensor):
        return f"<Tensor {tuple(k.shape)} {k.dtype} at {id(k):#x}>"
    return repr(k)


_FLOATS = (_C.float32, _C.float64)


def _state_tensor_for(param, value):
    """A state tensor loaded for param: a new contiguous tensor of param's dtype
    (floats; others keep theirs), never aliasing the loaded dict's tensors."""
    if param.dtype in _FLOATS and value.dtype in _FLOATS:
        value = value.to(param.dtype)
    else:
        value = value.clone()
    return value.contiguous()


class Optimizer:
    """Base class of the optimizers: holds param_groups (lists of parameters
    with their hyperparameters) and the per-parameter state.

    Args:
        params: an iterable of Tensors, or of dicts each giving ``"params"``
            and the hyperparameters that differ from ``defaults`` (a group).
        defaults: the hyperparameters of a group that does not give them.
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, _C.Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {type(params).__name__}")
        if isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list "
                "instead.")
        self.state = _TensorKeyedState()
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"

    # ------------------------------------------------------------ groups

    def add_param_group(self, param_group):
        """Adds a group of parameters (a dict with ``"params"`` and optional
        hyperparameters; the others come from ``defaults``)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, _C.Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list "
                "instead.")
        else:
            param_group["params"] = list(params)

        names, tensors = [], []
        for p in param_group["params"]:
            if isinstance(p, tuple):  # (name, param), as named_parameters() gives
                names.append(p[0])
                tensors.append(p[1])
            else:
                tensors.append(p)
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some "
                                 "param names are missing")
            param_group["param_names"] = names

        for p in tensors:
            if not isinstance(p, _C.Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                f"is {type(p).__name__}")
            if not (p.is_leaf or getattr(p, "retains_grad", False)):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)

        ids = [id(p) for p in tensors]
        if len(ids) != len(set(ids)):
            # As PyTorch (a warning for now): such a param is updated twice.
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        if self.param_groups and \
                ("param_names" in param_group) != ("param_names" in self.param_groups[0]):
            raise ValueError("all optimizer param groups should be with/without names.")
        self.param_groups.append(param_group)

    # ------------------------------------------------------------- grads

    def zero_grad(self, set_to_none=True):
        """Resets the gradients: sets every ``p.grad`` to None (default), or
        fills it with zeros (``set_to_none=False``)."""
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    # A gradient in a graph is cut off it first (PyTorch's detach_;
                    # here a detached handle on the same memory takes its place).
                    if g.grad_fn is not None:
                        g = p.grad = g.detach()
                    elif g.requires_grad:
                        g.requires_grad_(False)
                    g.fill_(0)

    def step(self, closure=None):
        """Performs one optimization step over every parameter that has a
        gradient; closure (optional) re-evaluates the model and returns the
        loss, which step returns."""
        loss = self._call_closure(closure)
        with no_grad():  # as PyTorch's step: no op here joins a graph
            self._step()
        return loss

    def _step(self):
        """The update itself (each optimizer's)."""
        raise NotImplementedError

    @staticmethod
    def _call_closure(closure):
        """The closure's loss, computed with autograd on (as PyTorch's step)."""
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # -------------------------------------------------------- state dicts

    def state_dict(self):
        """The optimizer's state as a dict of two entries, as PyTorch's:

        * ``state``: per-parameter state keyed by integer ids (the order of
          the parameters over all groups), holding the live state tensors;
        * ``param_groups``: each group's hyperparameters, with ``params`` the
          list of its parameters' ids.
        """
        mapping = {}
        start = 0

        def pack_group(group):
            nonlocal start
            packed = {k: v for k, v in group.items() if k != "params"}
            mapping.update({id(p): i for i, p in enumerate(group["params"], start)
                            if id(p) not in mapping})
            packed["params"] = [mapping[id(p)] for p in group["params"]]
            start += len(packed["params"])
            return packed

        param_groups = [pack_group(g) for g in self.param_groups]
        packed_state = {(mapping[id(k)] if isinstance(k, _C.Tensor) else k): v
                        for k, v in self.state.items()}
        return {"state": packed_state, "param_groups": param_groups}

    def load_state_dict(self, state_dict):
        """Loads a state from ``state_dict()`` (of an optimizer of the same
        parameters). Everything is validated before anything changes: the
        number of groups and of parameters in each, and the shape of every
        state tensor against its parameter's. Floating state tensors take
        their parameter's dtype; all are copied (never aliased)."""
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict or \
                "state" not in state_dict:
            raise ValueError("state_dict must be a dict with 'state' and 'param_groups' "
                             "(what Optimizer.state_dict() returns)")
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for i, (g, s) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 f"match the size of optimizer's group (group {i}: "
                                 f"{len(s['params'])} parameters, expected {len(g['params'])})")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def check(param, value, where):
            if isinstance(value, _C.Tensor):
                # 0-d state (a step counter) belongs to no element.
                if value.ndim != 0 and tuple(value.shape) != tuple(param.shape):
                    raise ValueError(f"loaded state dict has {where} of shape "
                                     f"{tuple(value.shape)} for a parameter of shape "
                                     f"{tuple(param.shape)}")
            elif isinstance(value, dict):
                for k, v in value.items():
                    check(param, v, f"{where}[{k!r}]")
            elif isinstance(value, (list, tuple)):
                for j, v in enumerate(value):
                    check(param, v, f"{where}[{j}]")

        def cast(param, value, key=None):
            if key == "step":  # a count, kept as a Python int (a sync for a tensor)
                return int(value.item() if isinstance(value, _C.Tensor) else value)
            if isinstance(value, _C.Tensor):
                return _state_tensor_for(param, value)
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        for k, v in state_dict["state"].items():
            if k in id_map:
                check(id_map[k], v, f"state[{k!r}]")
        state = _TensorKeyedState()
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, ng) for g, ng in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})


# Parameters per multi-tensor instruction (the C form takes up to 13000).
_MULTI_CHUNK = 4096


def _split_group(group):
    """The group's (param, grad) pairs that have a gradient, as (fast, slow):
    fast for the group's one multi-tensor instruction (contiguous param and
    grad), slow for one instruction each (other layouts, foreach=False, and
    every pair of a group that lists a parameter twice: those are updated
    one after the other, in order, as PyTorch does)."""
    fast, slow = [], []
    for p in group["params"]:
        g = p.grad
        if g is None:
            continue
        if type(g) is _C.Tensor and p.is_contiguous() and g.is_contiguous():
            fast.append((p, g))
        else:
            slow.append((p, g))
    if group.get("foreach") is False or len({id(p) for p, _ in fast}) != len(fast):
        return [], fast + slow
    return fast, slow


def _zeros_for(p):
    """A zero state buffer for p: contiguous (see _update)."""
    return _C.zeros_like(p)


def _update(update, p, g, *args):
    """Runs update(param, grad, *args), the fused instruction, on p.

    The instruction takes a dense param and tensors laid out as it; state
    buffers here are contiguous, so a contiguous p (the usual case) goes in
    as it is, with its grad made contiguous if it is not. Any other p is
    updated through a contiguous copy written back (two more instructions).
    """
    if type(g) is not _C.Tensor:
        raise TypeError(f"a parameter's grad must be a Tensor or None, not {type(g).__name__}")
    if p.is_contiguous():
        if not g.is_contiguous():
            g = g.contiguous()
        update(p, g, *args)
        return
    pc = p.contiguous()
    update(pc, g.contiguous(), *args)
    p.copy_(pc)
