"""The built-in tools panto-tool runs and panto-send offers to the model.

`schemas()` lists them as {"name", "description", "parameters"} (a JSON
schema); `run(name, input_json_text)` runs one call and returns
(content, is_error). A call never raises: bad arguments, unknown tools and
failures become error results, and every result is capped at 50 KB and has
the environment's API keys redacted.
"""
import os

NAMES = ("bash", "read", "write", "edit")
MUTATING = frozenset(("bash", "write", "edit"))
_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
          "object": (dict,), "array": (list,)}


def _module(name):
    """The module of a built-in tool, loaded when first asked for."""
    if name == "bash":
        from pantolib.tools import bash as tool
    elif name == "read":
        from pantolib.tools import read as tool
    elif name == "write":
        from pantolib.tools import write as tool
    elif name == "edit":
        from pantolib.tools import edit as tool
    else:
        raise KeyError(name)
    return tool


def schemas():
    """The JSON schemas of the built-in tools, in a stable order."""
    return [dict(_module(n).SCHEMA) for n in NAMES]


def _check(schema, args):
    params = schema["parameters"]
    for key in params.get("required", ()):
        if key not in args or args[key] is None:
            return f"missing required argument '{key}'"
    for key, spec in params["properties"].items():
        if key in args and args[key] is not None:
            want = _TYPES.get(spec.get("type"), (object,))
            v = args[key]
            if (isinstance(v, bool) and bool not in want) or not isinstance(v, want):
                article = "an" if spec["type"][0] in "aeiou" else "a"
                return f"argument '{key}' must be {article} {spec['type']}, not {type(v).__name__}"
    return None


def parse_args(input_text):
    """The arguments of a call as a dict, or raise ValueError saying what is wrong."""
    import orjson

    if isinstance(input_text, dict):
        return input_text
    if input_text is None or (isinstance(input_text, str) and not input_text.strip()):
        return {}
    if not isinstance(input_text, str):
        raise ValueError(f"the arguments must be JSON text, not {type(input_text).__name__}")
    try:
        args = orjson.loads(input_text)
    except orjson.JSONDecodeError as e:
        raise ValueError(f"the arguments were not valid JSON ({str(e).split(':')[0]})") from None
    if not isinstance(args, dict):
        raise ValueError(f"the arguments must be a JSON object, not {type(args).__name__}")
    return args


def check(name, input_text):
    """(arguments, None) for a call that can run, or (None, why not): an
    unknown tool, arguments that are not valid JSON or do not fit the schema."""
    if name not in NAMES:
        return None, f"unknown tool '{name}' (available: {', '.join(NAMES)})"
    try:
        args = parse_args(input_text)
    except ValueError as e:
        return None, f"not run: {e}; send them again as one JSON object"
    problem = _check(_module(name).SCHEMA, args)
    if problem:
        return None, problem
    return args, None


def run(name, input_text, cwd=None, timeout=None, env=None, watch=None, record=None):
    """Run one tool call: (content_text, is_error). Never raises for a bad call.
    watch(bytes): told what a bash command prints as it prints it (b"" now
    and then while it is quiet), for a live display. record: a dict that a
    write or edit fills with the result's `undo` field (pantolib.undo)."""
    from pantolib.secrets import env_keys
    from pantolib.tools.common import CAP, ToolError, cap_text, redact

    keys = env_keys(env)
    cwd = os.getcwd() if cwd is None else cwd
    args, problem = check(name, input_text)
    if problem:
        content, err = problem, True
    else:
        try:
            extra = {"watch": watch} if watch is not None and name == "bash" else \
                {"record": record} if record is not None and name in ("write", "edit") else {}
            content, err = _module(name).run(args, cwd, timeout=timeout, **extra)
        except (ToolError, ValueError) as e:   # ValueError: a NUL in a path
            content, err = str(e), True
        except OSError as e:
            where = f"'{e.filename}': " if getattr(e, "filename", None) else ""
            content, err = f"{where}{e.strerror or e}", True
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception as e:  # a bug in a tool must not lose the session
            content, err = f"internal error in tool '{name}': {type(e).__name__}: {e}", True
    # tools cap their own output (with a note); this is the backstop for the rest
    return redact(cap_text(content, CAP + 1024), keys), err
