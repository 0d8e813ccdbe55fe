# Types for `executorch.runtime` as this package serves it: the module is executorch_portable_lib.runtime, which
# carries its own annotations (py.typed); this stub points type checkers at it.
from executorch_portable_lib.runtime import BackendRegistry as BackendRegistry
from executorch_portable_lib.runtime import Method as Method
from executorch_portable_lib.runtime import MethodMeta as MethodMeta
from executorch_portable_lib.runtime import OperatorRegistry as OperatorRegistry
from executorch_portable_lib.runtime import Program as Program
from executorch_portable_lib.runtime import Runtime as Runtime
from executorch_portable_lib.runtime import Verification as Verification

__all__ = ["BackendRegistry", "Method", "MethodMeta", "OperatorRegistry", "Program", "Runtime", "Verification"]
