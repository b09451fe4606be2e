"""docs/troubleshooting.rst explains every message the library and its command line can print.

The messages are read from the package's source with :mod:`ast`, so a message added or reworded
in the code fails this test until the page says what it means:

* the message of every ``DynamoDBLockError(...)`` raised or built in the package, with the
  message helpers they embed (``_core.messages.explain``) and the pieces their callers pass
  in (``_failed(..., 'nothing was written')``);
* every log line of the package at WARNING or above: each call of a logging method
  (``.warning``, ``.warn``, ``.error``, ``.exception``, ``.critical``, ``.fatal``, whatever the
  receiver: a module's ``logger``, ``logging`` itself, or a wrapper with a logger's methods)
  anywhere under ``python_dynamodb_lock/``, and each ``.log(level, ...)`` whose level can be
  WARNING or above (a level the test cannot work out counts as WARNING), with the literal pieces
  the callers of a helper pass into its holes (``_call_safely('on_lost of leader election ...')``);
* the ``%``-templates of the WARNING and ERROR events of ``_common/observe.py`` (its ``_LINES`` table,
  which ``Observer.emit`` logs through one ``logger.log(level, template, ...)``);
* the warnings ``_common/config.py`` gives for risky settings (which the client logs with
  ``logger.warning('%s', warning)``);
* the ``CliError`` messages of ``_cli/``, the explanations of ``explain_failure`` and the
  demo's ``DemoError`` messages, which the command prints as ``dynamodb-lock: error: ...``.

The rule for levels: the page explains what can go wrong, so every WARNING, ERROR and CRITICAL
line must be on it. DEBUG lines (per heartbeat, per poll) and INFO lines (the life cycle: a lock
acquired, released or taken over, a client started or closed, a leader elected, an engine
started) report normal operation and need not be; the page lists some INFO lines anyway, where
one tells the reader something they may wonder about (an engine fallback). A WARNING+ call whose
message has no literal text (``logger.warning('%s', warning)``) must be one of :data:`RELAYS`,
whose messages are collected where they are made; any other makes the test fail, so that a new
way of logging is not silently skipped. A new helper that logs for its callers (a rate-limited
warning, say) is found when it calls a method named like a logger's; if it does not, add it to
:func:`all_templates`.

A template is reduced to its literal parts (an f-string's ``{...}`` and a ``%s`` are holes). The
page must contain the template's longest literal part when it has at least
:data:`MIN_FRAGMENT` characters (whitespace runs count as one space, on both sides); a template
with only shorter parts must match as a whole, each hole standing for some text.
"""
from __future__ import annotations

import ast
import logging
import pathlib
import re
import textwrap
from typing import Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple, Union

import pytest

import python_dynamodb_lock

PACKAGE_DIR = pathlib.Path(python_dynamodb_lock.__file__).resolve().parent
PROJECT_DIR = pathlib.Path(__file__).resolve().parent.parent
PAGE = PROJECT_DIR / 'docs' / 'troubleshooting.rst'

#: A literal part at least this long is specific enough to be looked for on its own.
MIN_FRAGMENT = 20
#: How much text a hole may stand for when a template is matched as a whole.
HOLE = r'.{0,200}?'

# A template: literal parts and holes (None), in order.
Piece = Optional[str]
Template = Tuple[Piece, ...]

PERCENT_HOLE = re.compile(r'%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdifgreExXo]')


def normalise(text: str) -> str:
    return re.sub(r'\s+', ' ', text)


# --------------------------------------------------------------------------------------------
# Reading the source
# --------------------------------------------------------------------------------------------

class Module:
    """One source file of the package, parsed, with each node's enclosing function."""

    def __init__(self, path: pathlib.Path, source: Optional[str] = None) -> None:
        self.path = path
        self.name = path.relative_to(PACKAGE_DIR).as_posix() if source is None else path.name
        self.tree = ast.parse(path.read_text(encoding='utf-8') if source is None else source, filename=str(path))
        self.function_of: Dict[ast.AST, Optional[ast.AST]] = {}
        self._index(self.tree, None)

    def _index(self, node: ast.AST, function: Optional[ast.AST]) -> None:
        for child in ast.iter_child_nodes(node):
            self.function_of[child] = function
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            self._index(child, inner)

    def functions(self) -> Iterator[ast.AST]:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield node


#: Modules whose messages never reach a user of this package: the simulation's model of the
#: published 0.9.1 client raises its own errors to its simulated caller, inside a simulated run.
NOT_OURS = ('testing/_simulation/published.py',)


def package_modules() -> List[Module]:
    return [Module(path) for path in sorted(PACKAGE_DIR.rglob('*.py'))
            if '__pycache__' not in path.parts and path.relative_to(PACKAGE_DIR).as_posix() not in NOT_OURS]


def called_name(call: ast.Call) -> Optional[str]:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def parameters(function: ast.AST) -> List[str]:
    assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
    arguments = function.args
    return [argument.arg for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]]


def reduce(node: ast.AST, module: Module, seen: FrozenSet[str] = frozenset()) -> List[Template]:
    """The templates an expression of a message can produce (several for a conditional)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value,)]
    if isinstance(node, ast.JoinedStr):
        return [tuple(value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
                      for value in node.values)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return [left + right for left in reduce(node.left, module, seen) for right in reduce(node.right, module, seen)]
    if isinstance(node, ast.IfExp):
        return reduce(node.body, module, seen) + reduce(node.orelse, module, seen)
    if isinstance(node, ast.Name) and node.id not in seen:
        templates = [template for value in assignments(node, module)
                     for template in reduce(value, module, seen | {node.id})]
        if templates:
            return templates
    return [(None,)]


def assignments(name: ast.Name, module: Module) -> List[ast.AST]:
    """The values assigned to ``name`` in its function (or module)."""
    scope = module.function_of.get(name) or module.tree
    return [statement.value for statement in ast.walk(scope)
            if isinstance(statement, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == name.id for target in statement.targets)]


def hole_names(node: ast.AST, module: Module, seen: FrozenSet[str] = frozenset()) -> Set[str]:
    """The names an expression of a message puts into its holes (following assignments)."""
    names: Set[str] = set()
    if isinstance(node, ast.Name) and node.id not in seen:
        for value in assignments(node, module):
            names |= hole_names(value, module, seen | {node.id})
        return names
    called = {id(sub.func) for sub in ast.walk(node) if isinstance(sub, ast.Call)}
    return {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name) and id(sub) not in called}


def message_argument(call: ast.Call, position: int, keyword: str) -> Optional[ast.AST]:
    if 0 <= position < len(call.args):
        return call.args[position]
    for argument in call.keywords:
        if argument.arg == keyword:
            return argument.value
    return None


def argument_templates(modules: Sequence[Module], function: ast.AST, parameter: str) -> List[Template]:
    """What the package's calls of ``function`` pass as ``parameter`` (string literals only)."""
    assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
    names = parameters(function)
    position = names.index(parameter) - (names[:1] in (['self'], ['cls']))
    found: List[Template] = []
    for module in modules:
        for call in ast.walk(module.tree):
            if isinstance(call, ast.Call) and called_name(call) == function.name:
                value = message_argument(call, position, parameter)
                if isinstance(value, (ast.JoinedStr, ast.BinOp)) or (
                        isinstance(value, ast.Constant) and isinstance(value.value, str)):
                    found.extend(reduce(value, module))
    return found


def calls_of(modules: Sequence[Module], name: str, position: int, keyword: str,
             only: Optional[str] = None) -> Iterator[Tuple[str, Template]]:
    """``(where, template)`` for the message argument of every call of ``name``, and for the
    literal pieces its callers pass into its holes."""
    for module in modules:
        if only is not None and not module.name.startswith(only):   # a file, or a folder ('_cli/')
            continue
        for call in ast.walk(module.tree):
            if not (isinstance(call, ast.Call) and called_name(call) == name):
                continue
            message = message_argument(call, position, keyword)
            if message is None:
                continue
            where = f'{module.name}:{call.lineno}'
            for template in reduce(message, module):
                yield where, template
            function = module.function_of.get(call)
            if function is None:
                continue
            for parameter in sorted(hole_names(message, module) & set(parameters(function)) - {'self', 'cls'}):
                for template in argument_templates(modules, function, parameter):
                    yield f'{where} ({parameter}=)', template


def returned_templates(module: Module, function_name: str) -> Iterator[Tuple[str, Template]]:
    for function in module.functions():
        assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        if function.name != function_name:
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Return) and node.value is not None:
                for template in reduce(node.value, module):
                    yield f'{module.name}:{node.lineno} ({function_name})', template


def appended_templates(module: Module, function_name: str) -> Iterator[Tuple[str, Template]]:
    for function in module.functions():
        assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        if function.name != function_name:
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and called_name(node) == 'append' and node.args:
                for template in reduce(node.args[0], module):
                    yield f'{module.name}:{node.lineno} ({function_name})', template


def percent_template(text: str) -> Template:
    pieces: List[Piece] = []
    for index, part in enumerate(PERCENT_HOLE.split(text)):
        if index:
            pieces.append(None)
        pieces.append(part)
    return tuple(pieces)


#: Logging methods and the level they log at (``log`` takes the level as its first argument).
LEVEL_METHODS = {'debug': logging.DEBUG, 'info': logging.INFO, 'warning': logging.WARNING,
                 'warn': logging.WARNING, 'error': logging.ERROR, 'exception': logging.ERROR,
                 'critical': logging.CRITICAL, 'fatal': logging.CRITICAL}
LEVEL_NAMES = {'DEBUG': logging.DEBUG, 'INFO': logging.INFO, 'WARNING': logging.WARNING, 'WARN': logging.WARNING,
               'ERROR': logging.ERROR, 'CRITICAL': logging.CRITICAL, 'FATAL': logging.CRITICAL}
#: Lines at this level or above must be explained on the page.
REQUIRED_LEVEL = logging.WARNING
#: ``(module, function)`` of the logging calls whose message is made elsewhere and collected there:
#: the client's risky-settings warnings (``_common/config.py``) and the observer's event lines (``_LINES``).
RELAYS = {('_client/context.py', 'check_construction'), ('_common/config.py', 'lock_lease'),
          ('_common/observe.py', 'emit')}


def level_of(node: ast.AST, module: Module, seen: FrozenSet[str] = frozenset()) -> Optional[int]:
    """The highest level a ``log(level, ...)`` argument can have; None when it cannot be worked out."""
    if isinstance(node, ast.Attribute) and node.attr in LEVEL_NAMES:
        return LEVEL_NAMES[node.attr]
    if isinstance(node, ast.Name) and node.id in LEVEL_NAMES:
        return LEVEL_NAMES[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.IfExp):
        levels = [level_of(node.body, module, seen), level_of(node.orelse, module, seen)]
        return None if None in levels else max(level for level in levels if level is not None)
    if isinstance(node, ast.Name) and node.id not in seen:
        values = assignments(node, module)
        levels = [level_of(value, module, seen | {node.id}) for value in values]
        return max(levels) if levels and None not in levels else None  # type: ignore[type-var]
    return None


def direct_logging_calls(module: Module) -> Iterator[Tuple[ast.Call, Union[int, ast.AST], ast.AST]]:
    """``(call, level, message)`` for every call of a logging method in a module: ``level`` is
    the method's (an int), or the expression ``log`` was given."""
    for node in ast.walk(module.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        if method == 'log' and len(node.args) >= 2:
            yield node, node.args[0], node.args[1]
        elif method in LEVEL_METHODS and node.args:
            message = node.args[0]
            is_text = isinstance(message, (ast.JoinedStr, ast.BinOp, ast.Name)) or (
                isinstance(message, ast.Constant) and isinstance(message.value, str))
            if is_text:
                yield node, LEVEL_METHODS[method], message


def argument_of(call: ast.Call, function: ast.AST, parameter: str) -> Optional[ast.AST]:
    """What ``call`` (a call of ``function``) passes as ``parameter``."""
    names = parameters(function)
    position = names.index(parameter) - (names[:1] in (['self'], ['cls']))
    return message_argument(call, position, parameter)


def calls_of_function(modules: Sequence[Module], function: ast.AST) -> Iterator[Tuple[Module, ast.Call]]:
    assert isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
    for module in modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call) and called_name(node) == function.name:
                yield module, node


def logging_calls(modules: Sequence[Module]) -> Iterator[Tuple[Module, ast.Call, int, ast.AST]]:
    """``(module, call, level, message)`` for every line the package logs.

    A logging call inside a helper that logs for its callers - its message is one of the
    helper's parameters, like a rate-limited ``self._log(kind, level, template, args)`` - stands
    for the helper's calls: each is a logging call with the level and message its caller passes.
    A level that cannot be worked out counts as WARNING.
    """
    for module in modules:
        for call, level, message in direct_logging_calls(module):
            function = module.function_of.get(call)
            names = parameters(function) if function is not None else []
            if isinstance(message, ast.Name) and message.id in names:
                callers = list(calls_of_function(modules, function))   # type: ignore[arg-type]
                for caller_module, caller in callers:
                    caller_message = argument_of(caller, function, message.id)  # type: ignore[arg-type]
                    if caller_message is None:
                        continue
                    caller_level: Optional[int]
                    if isinstance(level, ast.Name) and level.id in names:
                        level_argument = argument_of(caller, function, level.id)  # type: ignore[arg-type]
                        caller_level = None if level_argument is None else level_of(level_argument, caller_module)
                    else:
                        caller_level = level if isinstance(level, int) else level_of(level, module)
                    yield (caller_module, caller, logging.WARNING if caller_level is None else caller_level,
                           caller_message)
                if callers:
                    continue
            resolved = level if isinstance(level, int) else level_of(level, module)
            yield module, call, logging.WARNING if resolved is None else resolved, message


def split_percent(template: Template) -> Template:
    """A template's literal parts split at their ``%s``-style holes."""
    pieces: List[Piece] = []
    for piece in template:
        pieces.extend(percent_template(piece) if piece is not None else (None,))
    return tuple(pieces)


def logged_templates(modules: Sequence[Module], minimum: int = REQUIRED_LEVEL) -> Iterator[Tuple[str, Template]]:
    """The templates of the package's log lines at ``minimum`` or above, with the literal pieces
    that callers pass into a helper's holes (as for :func:`calls_of`)."""
    for module, call, level, message in logging_calls(modules):
        if level < minimum:
            continue
        where = f'{module.name}:{call.lineno} ({logging.getLevelName(level)})'
        for template in reduce(message, module):
            yield where, split_percent(template)
        function = module.function_of.get(call)
        if function is None:
            continue
        arguments = [argument for argument in call.args if argument is not message]
        holes = {name.id for argument in arguments for name in ast.walk(argument) if isinstance(name, ast.Name)}
        for parameter in sorted(holes & set(parameters(function)) - {'self', 'cls'}):
            for template in argument_templates(modules, function, parameter):
                yield f'{where} ({parameter}=)', template


def opaque_logging_calls(modules: Sequence[Module]) -> List[str]:
    """WARNING+ logging calls whose message has no literal text at all, outside :data:`RELAYS`."""
    found = []
    for module, call, level, message in logging_calls(modules):
        if level < REQUIRED_LEVEL:
            continue
        if any(literal_parts(split_percent(template)) for template in reduce(message, module)):
            continue
        function = module.function_of.get(call)
        name = getattr(function, 'name', '<module>')
        if (module.name, name) not in RELAYS:
            found.append(f'{module.name}:{call.lineno} in {name}()')
    return found


def observe_templates(module: Module) -> Iterator[Tuple[str, Template]]:
    """The WARNING and ERROR lines of ``_common/observe.py``'s ``_LINES`` table."""
    for node in ast.walk(module.tree):
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == '_LINES':
            assert isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict)
            for key, value in zip(node.value.keys, node.value.values):
                assert isinstance(value, ast.Tuple), ast.dump(value)
                level, text = value.elts[0], value.elts[1]
                assert isinstance(level, ast.Name) and isinstance(text, ast.Constant), ast.dump(value)
                if level.id in ('WARNING', 'ERROR'):
                    label = ast.unparse(key) if key is not None else '?'
                    yield f'{module.name} {label} ({level.id})', percent_template(text.value)


def all_templates() -> List[Tuple[str, Template]]:
    modules = package_modules()
    by_name = {module.name: module for module in modules}
    found: List[Tuple[str, Template]] = []
    found += calls_of(modules, 'DynamoDBLockError', 1, 'message')
    found += returned_templates(by_name['_core/messages.py'], 'explain')
    found += observe_templates(by_name['_common/observe.py'])
    found += logged_templates(modules)
    found += appended_templates(by_name['_common/config.py'], '_period_warnings')
    found += returned_templates(by_name['_common/config.py'], 'client_timeout_warning')
    found += calls_of(modules, 'CliError', 0, 'message', only='_cli/')
    found += returned_templates(by_name['_cli/failures.py'], 'explain_failure')
    found += calls_of(modules, 'DemoError', 0, 'message', only='_demo/')
    return found


# --------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------

def literal_parts(template: Template) -> List[str]:
    return [normalise(piece) for piece in template if piece]


def stable_fragment(template: Template) -> Optional[str]:
    """The template's longest literal part, if it is long enough to look for on its own."""
    parts = sorted((part.strip() for part in literal_parts(template)), key=len, reverse=True)
    return parts[0] if parts and len(parts[0]) >= MIN_FRAGMENT else None


def whole_pattern(template: Template) -> Optional[re.Pattern]:
    """The template as a regular expression (holes match any short text); None when its
    literal text is too short to say anything."""
    if sum(len(part.strip()) for part in literal_parts(template)) < 3:
        return None
    pattern = ''.join(HOLE if piece is None else re.escape(normalise(piece)).replace(r'\ ', ' ').replace(' ', r'\s*')
                      for piece in template)
    return re.compile(pattern, re.DOTALL)


def covered(template: Template, page: str) -> bool:
    fragment = stable_fragment(template)
    if fragment is not None:
        return fragment in page
    pattern = whole_pattern(template)
    return pattern is None or pattern.search(page) is not None


def missing_from(page: str, templates: Sequence[Tuple[str, Template]]) -> List[str]:
    return [f'{where}: {render(template)!r}' for where, template in templates if not covered(template, page)]


def render(template: Template) -> str:
    return ''.join('{...}' if piece is None else piece for piece in template)


def page_text() -> str:
    return normalise(PAGE.read_text(encoding='utf-8'))


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

TEMPLATES = all_templates()


def test_the_extraction_finds_the_messages_it_is_meant_to() -> None:
    rendered = [render(template) for _, template in TEMPLATES]
    wheres = [where for where, _ in TEMPLATES]
    # DynamoDBLockError messages in several modules, an f-string and a plain string among them.
    assert any('The lock client has been closed' == text for text in rendered)
    assert any(text.startswith('Could not acquire {...} within {...}s: held by') for text in rendered)
    assert sum(where.startswith('_core/') for where in wheres) >= 10
    # A message held in a variable, with both of its branches.
    assert any(' was lost {...} released: its row was gone' in text for text in rendered)
    assert any(' was taken over by {...} {...} released; their row was left alone' in text for text in rendered)
    # A piece passed in by a caller, and a helper's own words.
    assert any('ClientRequestToken={...} within 10 minutes is safe' in text for text in rendered)
    assert any('does not have the expected key schema' in text for text in rendered)
    # _common/observe.py's WARNING/ERROR lines, and not its DEBUG/INFO ones.
    assert any(text.startswith('Heartbeat of {...} failed, will retry next period') for text in rendered)
    assert not any(text.startswith('Heartbeat of {...}: version') for text in rendered)
    # The command line's own errors.
    assert any(text.startswith('no AWS region configured') for text in rendered)
    assert len(TEMPLATES) >= 60


def test_every_log_line_at_warning_or_above_is_collected() -> None:
    rendered = {render(template): where for where, template in TEMPLATES}
    # Modules beyond the client drivers: for_table's TTL checks, the recipes, the engines.
    assert any(text.startswith('Table {...} has no time-to-live enabled') for text in rendered)
    assert any(text.startswith('Semaphore {...}: this process uses limit') for text in rendered)
    assert any(text.startswith('DynamoDB Local did not start ({...})') for text in rendered)
    # logger.log with a level computed from the loss reason (WARNING for some): required.
    assert any(text.startswith('Leader election {...}: candidate {...} is no longer leader') for text in rendered)
    # A helper's caller's piece: _call_safely(f'on_lost of leader election {...}', ...) -> '%s raised'.
    assert any(text.startswith('on_lost of leader election ') for text in rendered)
    # INFO lines are not required (the life cycle): a leader elected, a table created.
    assert not any('elected, term' in text or text.startswith('Creating lock table') for text in rendered)
    assert all('(DEBUG)' not in where and '(INFO)' not in where for where in rendered.values())


def test_a_warning_without_literal_text_is_reported_unless_a_known_relay() -> None:
    opaque = opaque_logging_calls(package_modules())
    assert not opaque, (
        'These WARNING+ logging calls have no literal text, so the page cannot be checked for them: '
        f'{opaque}. Log a literal %-template instead, or, if the call relays messages collected '
        'elsewhere in all_templates() (as _client/context.py relays _common/config.py\'s warnings), add its '
        '(module, function) to RELAYS.')
    source = ("import logging\n"
              "logger = logging.getLogger(__name__)\n"
              "def relay(line, level):\n"
              "    logger.warning(line)\n"
              "    logger.info(line)\n"
              "    logger.log(logging.ERROR if level else logging.DEBUG, '%s', line)\n")
    assert opaque_logging_calls([Module(pathlib.Path('example.py'), source)]) == [
        'example.py:4 in relay()', 'example.py:6 in relay()']


def levels_and_templates(source: str) -> Tuple[List[Tuple[int, int]], List[Tuple[str, Template]]]:
    """``(line, level)`` of each logging call of a piece of source, and its required templates."""
    module = Module(pathlib.Path('example.py'), source)
    return ([(call.lineno, level) for _, call, level, _ in logging_calls([module])],
            list(logged_templates([module])))


def test_the_level_of_a_log_call_is_its_highest_possible_one() -> None:
    source = textwrap.dedent('''\
        import logging
        def f(reason, unknown):
            level = logging.WARNING if reason else logging.INFO
            logger.log(level, 'lost: %s', reason)
            logger.log(logging.DEBUG, 'detail %s', reason)
            logger.log(unknown, 'who knows: %s', reason)
            logger.info('fine %s', reason)
    ''')
    levels, templates = levels_and_templates(source)
    assert levels == [(4, logging.WARNING), (5, logging.DEBUG), (6, logging.WARNING), (7, logging.INFO)]
    assert [template for _, template in templates] == [('lost: ', None, ''), ('who knows: ', None, '')]


def test_a_helper_that_logs_for_its_callers_stands_for_its_calls() -> None:
    """A wrapper such as a rate-limited ``self._log(kind, level, template, args)``: each call of
    it is a log line, at the level and with the template its caller passes."""
    source = textwrap.dedent('''\
        import logging
        from logging import ERROR, INFO, WARNING
        class Observer:
            def _log(self, kind, level, template, args):
                if self.admit(kind):
                    template += ' (%s more)'
                    logger.log(level, template, *args)
            def use(self, key, line):
                self._log('a', WARNING, 'Lock %s is in trouble', (key,))
                self._log('b', INFO, 'Lock %s is fine', (key,))
                self._log(kind='c', level=ERROR, template='Lock %s broke', args=(key,))
                self._log('d', WARNING, line, ())
    ''')
    levels, templates = levels_and_templates(source)
    assert levels == [(9, logging.WARNING), (10, logging.INFO), (11, logging.ERROR), (12, logging.WARNING)]
    assert templates == [
        ('example.py:9 (WARNING)', ('Lock ', None, ' is in trouble')),
        ('example.py:11 (ERROR)', ('Lock ', None, ' broke')),
        ('example.py:12 (WARNING)', (None,))]            # no text: reported as opaque instead
    assert opaque_logging_calls([Module(pathlib.Path('example.py'), source)]) == ['example.py:12 in use()']


def templates_in(source: str) -> List[Tuple[str, Template]]:
    """The DynamoDBLockError templates of a piece of source code."""
    return list(calls_of([Module(pathlib.Path('example.py'), source)], 'DynamoDBLockError', 1, 'message'))


def test_f_strings_variables_and_callers_pieces_are_reduced_to_their_literal_parts() -> None:
    source = (
        "def fail(key, owner, what):\n"
        "    if owner is None:\n"
        "        message = f'{key} is gone, {what}'\n"
        "    else:\n"
        "        message = f'{key} is held by {owner!r} now, ' + what\n"
        "    raise DynamoDBLockError('LOCK_STOLEN', message)\n"
        "def write(key):\n"
        "    fail(key, None, 'so nothing was written')\n"
        "    raise DynamoDBLockError(code='UNKNOWN', message=f'Could not write {key}: {explain(key)}')\n")
    assert [template for _, template in templates_in(source)] == [
        (None, ' is gone, ', None),
        (None, ' is held by ', None, ' now, ', None),
        ('so nothing was written',),
        ('Could not write ', None, ': ', None),
    ]


@pytest.mark.parametrize('template', [
    (None, ' is not held by this client (', None, ')'),
    ('Not ', None, ' is not held by this client (', None, ')'),
])
def test_a_template_is_found_by_its_longest_literal_part(template: Template) -> None:
    assert stable_fragment(template) == 'is not held by this client ('
    assert covered(template, 'LOCK_NOT_OWNED: ``<key> is not held by this client (<owner>)``')
    assert not covered(template, 'LOCK_NOT_OWNED: not held here')


def test_a_template_of_short_parts_must_match_as_a_whole() -> None:
    template: Template = ('Could not ', None, ' ', None, ': ', None)
    assert stable_fragment(template) is None
    assert covered(template, normalise('``Could not read lock\n   k/- in table T: <why>``'))
    assert not covered(template, 'Could not')


def test_the_page_explains_every_message() -> None:
    missing = missing_from(page_text(), TEMPLATES)
    assert not missing, (
        f'docs/{PAGE.name} does not explain these messages (where: the template, {{...}} for a hole):\n'
        + '\n'.join(missing) + '\n'
        f'Add each to docs/{PAGE.name}, in the section of its kind (a log line under "Log lines", a '
        'DynamoDBLockError under its operation, a CLI error under "The command line"), as an entry\n\n'
        '``<the message, with <what> for each hole>`` (WARNING)\n'
        '    What it means. **What to do:** ...\n\n'
        f'The page must contain the message\'s longest literal part when that has {MIN_FRAGMENT} characters '
        'or more, else the whole message with any text in its holes.')


def test_removing_a_message_from_the_page_is_noticed() -> None:
    """The check can fail: take each of a few messages out of the page and it is reported."""
    page = page_text()
    checked = 0
    for where, template in TEMPLATES:
        fragment = stable_fragment(template)
        if fragment is None or page.count(fragment) != 1:
            continue
        without = page.replace(fragment, '')
        assert missing_from(without, [(where, template)]), where
        checked += 1
    assert checked >= 30
