"""nn.Module: the base class of layers, with PyTorch's names and meanings.

A Module keeps its parameters, buffers and child modules in three ordered
dicts (registration order is iteration order and state_dict order). Assigning
an attribute routes the value: a leaf Tensor that requires grad (an
nn.Parameter) becomes a parameter, a Module a child, and a Tensor assigned to
an existing buffer's name replaces the buffer; anything else is a plain
attribute.
"""
from collections import OrderedDict, namedtuple

from .. import _C
from ..autograd import no_grad
from .parameter import Parameter


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: the keys the model wanted but did not get, and
    the keys it got but has no place for."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _type_name(value):
    return f"eagervm.Tensor ({value.dtype})" if isinstance(value, _C.Tensor) \
        else type(value).__name__


def _check_name(kind, name, module, table):
    """PyTorch's checks on a name being registered; table is the dict it goes in."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f"{kind} name can't contain \".\", got: {name}")
    if name == "":
        raise KeyError(f"{kind} name can't be empty string \"\"")
    if hasattr(module, name) and name not in table:
        raise KeyError(f"attribute '{name}' already exists")


class Module:
    """The base class of every layer: subclass it, call super().__init__() first,
    assign parameters and submodules as attributes, and define forward()."""

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments "
                            f"{args or ''}{kwargs or ''}")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f"Module [{type(self).__name__}] is missing the required \"forward\" function")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------ registration

    def _check_init(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name, param):
        """Adds a parameter (a leaf Tensor, or None for a declared but absent one)."""
        self._check_init("parameter")
        _check_name("parameter", name, self, self._parameters)
        if param is not None:
            if not isinstance(param, _C.Tensor):
                raise TypeError(f"cannot assign '{_type_name(param)}' object to parameter "
                                f"'{name}' (nn.Parameter or None required)")
            if not param.is_leaf:
                raise ValueError(
                    f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters "
                    "must be created explicitly. To express '" + name + "' as a function of "
                    "another Tensor, compute the value in the forward() method.")
        self._buffers.pop(name, None)
        self._non_persistent_buffers_set.discard(name)
        self._modules.pop(name, None)
        self.__dict__.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Adds a buffer: state that is no parameter (in state_dict unless not persistent)."""
        self._check_init("buffer")
        _check_name("buffer", name, self, self._buffers)
        if tensor is not None and not isinstance(tensor, _C.Tensor):
            raise TypeError(f"cannot assign '{_type_name(tensor)}' object to buffer '{name}' "
                            "(eagervm.Tensor or None required)")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Adds a child module (or None) under name."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_type_name(module)} is not a Module subclass")
        self._check_init("module")
        _check_name("module", name, self, self._modules)
        self._parameters.pop(name, None)
        self._buffers.pop(name, None)
        self._non_persistent_buffers_set.discard(name)
        self.__dict__.pop(name, None)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name)  # a plain attribute, buffer or child of that name gives way
            self.register_parameter(name, value)
        elif params is not None and name in params:
            # A frozen parameter (requires_grad off) is no nn.Parameter to isinstance;
            # assigning it to its own name again is still fine.
            if value is not None and value is not params[name]:
                raise TypeError(
                    f"cannot assign '{_type_name(value)}' as parameter '{name}' (nn.Parameter "
                    "or None expected; a parameter is a leaf Tensor that requires grad: "
                    "use nn.Parameter(t), or register_parameter for a frozen one)")
            params[name] = value
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name)
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_type_name(value)}' as child module "
                                f"'{name}' (nn.Module or None expected)")
            self._modules[name] = None
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, _C.Tensor):
                raise TypeError(f"cannot assign '{_type_name(value)}' as buffer '{name}' "
                                "(eagervm.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name):
        """Removes name from the attributes and the three tables."""
        for table in (self.__dict__, self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name):
        # Only called when normal lookup fails: look in the three tables.
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(super().__dir__()) + list(self._parameters) + list(self._buffers) + \
            list(self._modules)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ------------------------------------------------------ iteration

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) for self and every descendant, depth first, each module once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        """(name, module) for the direct children, each module once."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, table, prefix, recurse, remove_duplicate):
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        seen = set()
        for mod_prefix, module in mods:
            for name, value in getattr(module, table).items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter) for self's parameters and (recurse) its descendants'."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------ state

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of parameters and persistent buffers by dotted name
        ("0.weight"); the values share the module's elements (detached unless keep_vars)."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _state_targets(self):
        """(dotted key, tensor) for every entry state_dict would hold, and the set of
        dotted prefixes that belong to submodules."""
        targets = OrderedDict()
        for mod_prefix, module in self.named_modules(remove_duplicate=False):
            dot = mod_prefix + "." if mod_prefix else ""
            for name, p in module._parameters.items():
                if p is not None:
                    targets[dot + name] = p
            for name, b in module._buffers.items():
                if b is not None and name not in module._non_persistent_buffers_set:
                    targets[dot + name] = b
        return targets

    def load_state_dict(self, state_dict, strict=True):
        """Copies state_dict's tensors into the parameters and buffers in place (under
        no_grad: optimizers keep their references), converting the dtype.

        Returns (missing_keys, unexpected_keys). With strict, any missing or unexpected
        key raises RuntimeError before anything changes; a shape mismatch or a value that
        is no Tensor raises whatever strict says, also before anything changes.
        """
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        targets = self._state_targets()
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict.keys() if k not in targets]
        errors = []
        if strict:
            if missing:
                errors.append("Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ". ")
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ". ")
        for key, target in targets.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, _C.Tensor):
                errors.append(f'While copying the parameter named "{key}", expected '
                              f"eagervm.Tensor from checkpoint but received {type(value)}")
            elif tuple(value.shape) != tuple(target.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape "
                              f"{tuple(value.shape)} from checkpoint, the shape in current "
                              f"model is {tuple(target.shape)}.")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:"
                               "\n\t" + "\n\t".join(errors))
        with no_grad():
            for key, target in targets.items():
                if key in state_dict:
                    target.copy_(state_dict[key])
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------ modes and helpers

    def train(self, mode=True):
        """Sets training mode (Dropout drops) on self and every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        """train(False): evaluation mode (Dropout is the identity); returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Sets requires_grad on every parameter (False freezes them); returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Clears every parameter's .grad (set_to_none=False: zeros it in place)."""
        for p in self.parameters():
            grad = p.grad
            if grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with no_grad():
                    grad.fill_(0)

    def apply(self, fn):
        """Calls fn on every descendant (children first), then on self; returns self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def get_submodule(self, target):
        """The descendant at the dotted path target ("" is self)."""
        module = self
        if target == "":
            return module
        for item in target.split("."):
            if not isinstance(getattr(module, "_modules", None), dict) or \
                    item not in module._modules:
                raise AttributeError(f"{type(module).__name__} has no attribute `{item}`")
            module = module._modules[item]
        return module

    # ------------------------------------------------------ repr

    def extra_repr(self):
        """The text inside this module's parentheses in repr (its settings)."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2)
                       for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"
