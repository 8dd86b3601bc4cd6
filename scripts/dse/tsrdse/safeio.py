# Reading what a user hands the DSE (space files, configs, synthesis results, sweep
# contexts) without trusting it: regular files only, a size bound checked before reading
# (and a bounded read, for files that grow), a nesting bound checked before parsing, no
# YAML aliases, and error messages that never carry a big or multi-line value.
#
# Why each bound: a FIFO or a device blocks open()/read() forever; a 1 GiB file costs
# twice its size in memory as text; json/yaml parse recursively (100,000 brackets give a
# RecursionError); a YAML alias expands a 0.4 KB file into billions of nodes ("billion
# laughs"), and printing such a value in an error message takes minutes. The size bound
# is the C side's (TSR_CONFIG_MAX_FILE in isa/tsr_config.h: 1 MiB).
import itertools
import json
import os
import re
import stat
import sys

MAX_FILE_BYTES = 1 << 20  # space files, configs, synthesis result files: the C side's bound
MAX_CONTEXT_BYTES = 256 << 20  # a sweep context (dse.py writes it; ~0.5 KB per point)
MAX_DEPTH = 32  # brackets / YAML collections nested deeper than any space file needs
SHOW_CHARS = 60  # a quoted value in a message is cut here
LINE_CHARS = 1000  # a whole message is cut here


class InputError(Exception):
    """A file or argument the user gave is unusable: str() is one line naming it."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


def _kind(mode):
    for test, name in ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "is a FIFO (named pipe)"),
                       (stat.S_ISCHR, "is a character device"), (stat.S_ISBLK, "is a block device"),
                       (stat.S_ISSOCK, "is a socket")):
        if test(mode):
            return name
    return "is a special file"


def _open_regular(path, noun, limit):
    """A descriptor of a regular file of at most `limit` bytes. O_NONBLOCK: opening a FIFO
    would otherwise wait for a writer (no effect on regular files); the type and size are
    checked on the open descriptor (no race with a rename). noun: "the space file", "it"."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        raise InputError(path, e.strerror if noun == "it" else f"cannot open {noun}: {e.strerror}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(path, f"{noun} {_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise InputError(path, f"{noun} is {st.st_size} bytes, more than the {limit} allowed")
    except BaseException:
        os.close(fd)
        raise
    return fd


def sha256_file(path, what, limit):
    """sha256 of a regular file of at most `limit` bytes, read in blocks."""
    import hashlib
    fd = _open_regular(path, "it", limit)
    h = hashlib.sha256()
    try:
        with os.fdopen(os.dup(fd), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        raise InputError(path, e.strerror)
    finally:
        os.close(fd)
    return h.hexdigest()


def read_bytes(path, what, limit=MAX_FILE_BYTES):
    """The bytes of a regular file of at most `limit` bytes; the read stops one byte past
    the limit (a file that grows after the size check)."""
    fd = _open_regular(path, f"the {what}", limit)
    try:
        chunks, n = [], 0
        while True:
            try:
                b = os.read(fd, min(1 << 16, limit + 1 - n))
            except OSError as e:
                raise InputError(path, f"cannot read the {what}: {e.strerror}")
            if not b:
                break
            chunks.append(b)
            n += len(b)
            if n > limit:
                raise InputError(path, f"the {what} grew past {limit} bytes while being read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path, what, limit=MAX_FILE_BYTES):
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(path, f"the {what} is not UTF-8 text (byte {e.start})")


# a JSON string (escapes included; an unterminated one runs to the end) or a bracket
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]', re.S)


def json_depth_ok(text, limit=MAX_DEPTH):
    """False if brackets outside strings nest deeper than limit (stops at the first such)."""
    depth = 0
    for m in _JSON_TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > limit:
                return False
        elif c in "]}":
            depth -= 1
    return True


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"the key {show(k)} appears twice in one object")
        d[k] = v
    return d


def load_json(text, path, what):
    """Parse JSON text of a file: nesting bounded first; NaN/Infinity and a key given twice
    in one object refused (json takes them silently: a silent wrong answer)."""
    if not json_depth_ok(text):
        raise InputError(path, f"the {what} nests brackets more than {MAX_DEPTH} deep")
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise InputError(path, f"malformed JSON near line {e.lineno}: {e.msg}")
    except (ValueError, RecursionError) as e:  # our hooks; an integer of more than 4300 digits
        raise InputError(path, f"malformed JSON: {clip(str(e), 200)}")


def load_yaml(text, path, what):
    """Parse YAML (python3-yaml, safe loader) after a pass over its events: anchors and
    aliases are refused (the expansion is what makes a billion laughs), and so is nesting
    deeper than MAX_DEPTH (the composer recurses)."""
    import yaml  # Debian's python3-yaml; the caller says what to do without it
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    depth = 0
    try:
        for ev in yaml.parse(text, Loader=loader):
            if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None) is not None:
                raise InputError(path, f"YAML anchors and aliases (&, *) are not allowed in a {what} "
                                       f"(line {ev.start_mark.line + 1})")
            if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(path, f"the {what} nests more than {MAX_DEPTH} deep "
                                           f"(line {ev.start_mark.line + 1})")
            elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        raise InputError(path, f"malformed YAML: {clip(str(e).splitlines()[0] if str(e) else type(e).__name__, 200)}")
    except (ValueError, TypeError, RecursionError) as e:  # e.g. an integer of more than 4300 digits
        raise InputError(path, f"malformed YAML: {clip(str(e), 200)}")


class _Full(Exception):
    pass


def show(v, limit=SHOW_CHARS):
    """v as JSON for a message, cut after `limit` characters: the walk stops there, so a huge
    (or shared, alias-expanded) value costs no more than a small one."""
    out, n = [], [0]

    def put(s):
        out.append(s)
        n[0] += len(s)
        if n[0] > limit:
            raise _Full

    def walk(x, d):
        if d > MAX_DEPTH + 2:
            put("...")
        elif isinstance(x, dict):
            put("{")
            for i, (k, val) in enumerate(x.items()):
                put(", " if i else "")
                walk(k, d + 1)
                put(": ")
                walk(val, d + 1)
            put("}")
        elif isinstance(x, (list, tuple)):
            put("[")
            for i, val in enumerate(x):
                put(", " if i else "")
                walk(val, d + 1)
            put("]")
        elif isinstance(x, str):
            put(json.dumps(x[:limit + 1]))
        elif isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 128:
            put(f"<an integer of {x.bit_length()} bits>")  # str() of a huge int is quadratic
        elif x is None or isinstance(x, (bool, int, float)):
            put(json.dumps(x))
        else:
            put(repr(x)[:limit + 1])

    try:
        walk(v, 0)
    except _Full:
        pass
    s = "".join(out)
    return s if len(s) <= limit else s[:limit] + "..."


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clip(msg, limit=LINE_CHARS):
    """One printable line: control characters (newlines, ANSI escapes, bidi overrides)
    escaped, and at most `limit` characters."""
    msg = _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256
                           else f"\\u{ord(m.group()):04x}", msg[:limit * 2])
    return msg if len(msg) <= limit else msg[:limit] + "..."


def workers():
    """Threads for checks that mostly wait on CLI processes: one per CPU (at most 8)."""
    try:
        return max(1, min(8, len(os.sched_getaffinity(0))))
    except (AttributeError, OSError):
        return max(1, min(8, os.cpu_count() or 1))


def pmap(fn, items, chunk=256):
    """fn over items on worker threads, results in order, `chunk` items submitted at a time
    (a consumer that stops early wastes at most one chunk). Stopping (break, an exception,
    Ctrl-C) cancels what is queued."""
    from concurrent.futures import ThreadPoolExecutor
    it = iter(items)
    ex = ThreadPoolExecutor(workers())
    try:
        while True:
            batch = list(itertools.islice(it, chunk))
            if not batch:
                return
            yield from ex.map(fn, batch)
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def guard(prog, main, input_errors=()):
    """Run an entry point's main(): its input errors (InputError and `input_errors`) are one
    line and exit 2; Ctrl-C is one line and exit 130; a closed stdout (`| head`) ends quietly;
    anything else is a bug: one line with the exception type, exit 1. Never a traceback."""
    try:
        rc = main()
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        sys.exit(130)
    except (InputError,) + tuple(input_errors) as e:
        sys.stderr.write(clip(f"{prog}: {e}") + "\n")
        sys.exit(2)
    except BrokenPipeError:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        sys.exit(1)
    except RecursionError:
        sys.stderr.write(f"{prog}: input nested too deeply (RecursionError)\n")
        sys.exit(2)
    except OSError as e:  # the machine's (disk full, permissions): not a bug, still one line
        where = f"{e.filename}: " if e.filename else ""
        sys.stderr.write(clip(f"{prog}: {where}{e.strerror or e}") + "\n")
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 (the last line of defence: a bug, said in one line)
        sys.stderr.write(clip(f"{prog}: internal error ({type(e).__name__}: {e}); please report it") + "\n")
        sys.exit(1)
    sys.exit(rc or 0)
