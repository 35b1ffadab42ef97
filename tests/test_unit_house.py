"""The house drawn from its imports (STYLE "Next"): no circle among panto's
modules, the imports inside functions counted too; no module loaded by a
name built at run time (importlib hides a circle from this drawing); no
private name of one module used by another."""
import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pantolib")


def _modules():
    out = {}
    for d, _, names in os.walk(ROOT):
        for n in names:
            if n.endswith(".py"):
                path = os.path.join(d, n)
                name = "pantolib." + os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()
TREES = {name: ast.parse(open(path, encoding="utf-8").read(), path) for name, path in MODULES.items()}


def _imports(name, tree):
    """(module imported, names taken from it, module bound to a local name) for each import."""
    package = name if MODULES[name].endswith("__init__.py") else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, (), {(a.asname or a.name.partition(".")[0]): a.name}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                if sub in MODULES:
                    yield sub, (), {a.asname or a.name: sub}
                else:
                    yield base, (a.name,), {}


def _graph():
    edges = {name: set() for name in MODULES}
    for name, tree in TREES.items():
        for target, _, _ in _imports(name, tree):
            if target in MODULES and target != name:
                edges[name].add(target)
    return edges


def _circles(edges):
    """The strongly connected components of more than one module (Tarjan's, iteratively)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
    return found


def test_the_drawing_sees_every_kind_of_import():
    # the checks below are only as good as the drawing: it must see a lazy
    # import inside a function, a package's member, and a relative import
    edges = _graph()
    assert "pantolib.providers.openai_chat" in edges["pantolib.providers"]     # inside api_module
    assert "pantolib.agents.claude_code" in edges["pantolib.agents"]           # inside module()
    assert "pantolib.providers.common" in edges["pantolib.providers.anthropic_messages"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_circle_among_the_modules():
    assert _circles(_graph()) == []


def test_no_module_is_loaded_by_a_name_made_at_run_time():
    # launch.py's table of commands is the one place: each command module is
    # a leaf that nothing in pantolib imports
    users = sorted(name for name, tree in TREES.items()
                   if any(target == "importlib" for target, _, _ in _imports(name, tree)))
    assert users == ["pantolib.launch"]
    for name, targets in _graph().items():
        if not name.startswith("pantolib.cmd"):
            assert not {t for t in targets if t.startswith("pantolib.cmd.")}, f"{name} imports a command"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_of_another_module(name):
    tree = TREES[name]
    bound = {}
    for target, taken, modules in _imports(name, tree):
        if target.startswith("pantolib"):
            for n in taken:
                assert not (n.startswith("_") and not n.startswith("__")), f"{name} takes {target}.{n}"
            bound.update(modules)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            attr = node.attr
            assert not (attr.startswith("_") and not attr.startswith("__")), \
                f"{name} uses {bound[node.value.id]}.{attr}"
