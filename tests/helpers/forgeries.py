"""The candidates of tests/box/test_forged_verdicts.py: wrong answers that try to make a
`python_tests` check pass anyway, and the checks they attack."""

ADD_CHECK = (
    "def check(candidate):\n"
    "    assert candidate(1, 2) == 3\n"
    "    assert candidate(2, 2) == 4\n"
    "    assert candidate(5, -2) == 3\n"
)
ADD_ASSERTS = "assert add(1, 2) == 3\nassert add(2, 2) == 4\nassert add(5, -2) == 3\n"
STYLES = {
    "check_function": {"tests": ADD_CHECK, "entry_point": "add"},
    "plain_asserts": {"tests": ADD_ASSERTS},
}
CORRECT_ADD = "def add(a, b):\n    return a + b\n"

# Every candidate is wrong (add returns 0 or nothing) and tries to make the check pass anyway.
FORGERIES = {
    "os_exit_in_default_argument": "import os\ndef add(a, b, _=os._exit(0)):\n    return 0\n",
    "os_exit_in_return_annotation": "import os\ndef add(a, b) -> os._exit(0):\n    return 0\n",
    "os_exit_in_class_body": "import os\nclass Sneaky:\n    os._exit(0)\ndef add(a, b):\n    return 0\n",
    "os_exit_in_decorator": "import os\n@(lambda f: os._exit(0))\ndef add(a, b):\n    return 0\n",
    "os_exit_in_function": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "system_exit_in_function": "def add(a, b):\n    raise SystemExit(0)\n",
    "sys_exit_in_function": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "exit_builtin": "def add(a, b):\n    exit()\n",
    "quit_builtin": "def add(a, b):\n    quit(0)\n",
    "atexit_hook": (
        "import atexit, os\ndef add(a, b, _=atexit.register(lambda: os._exit(0))):\n    return 0\n"
    ),
    "sys_exit_replaced": (
        "import os, sys\n"
        "def add(a, b, _=setattr(sys, 'exit', lambda *args: os._exit(0))):\n    return 0\n"
    ),
    "exec_true": "import os\ndef add(a, b, _=os.execv('/bin/true', ['true'])):\n    return 0\n",
    "exec_fake_harness": (
        "import os, sys\n"
        "def add(a, b, _=os.execv(sys.executable, [sys.executable, '-c', "
        "\"print('3/3 asserts passed')\"])):\n    return 0\n"
    ),
    "fork_and_parent_exits_0": (
        "import os\n"
        "def _leave():\n    if os.fork():\n        os._exit(0)\n"
        "def add(a, b, _=_leave()):\n    return 0\n"
    ),
    "fake_success_line_then_exit": (
        "import os, sys\n"
        "def add(a, b):\n"
        "    print('3/3 asserts passed\\nPASSED\\nOK\\nall tests passed', flush=True)\n"
        "    sys.stderr.write('3/3 asserts passed\\n')\n"
        "    sys.stderr.flush()\n"
        "    os._exit(0)\n"
    ),
    "thread_prints_success_and_exits": (
        "import os, threading, time\n"
        "def _cheat():\n"
        "    time.sleep(0.2)\n"
        "    print('3/3 asserts passed', flush=True)\n"
        "    os._exit(0)\n"
        "def add(a, b, _=threading.Thread(target=_cheat, daemon=True).start()):\n"
        "    time.sleep(1)\n    return 0\n"
    ),
    "del_exits_0_at_shutdown": (
        "import os\n"
        "class _Exit:\n    def __del__(self, _exit=os._exit):\n        _exit(0)\n"
        "def add(a, b, _keep=_Exit()):\n    return 0\n"
    ),
    "sigalrm_handler_exits_0": (
        "import os, signal, time\n"
        "def add(a, b, _=(signal.signal(signal.SIGALRM, lambda *a: os._exit(0)), signal.alarm(1))):\n"
        "    time.sleep(3)\n    return 0\n"
    ),
    "sigkill_self": "import os, signal\ndef add(a, b):\n    os.kill(os.getpid(), signal.SIGKILL)\n",
    "sigkill_own_process_group": "import os, signal\ndef add(a, b):\n    os.killpg(0, signal.SIGKILL)\n",
    "keyboard_interrupt": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "segfault": "import ctypes\ndef add(a, b):\n    return ctypes.string_at(0)\n",
    "eq_always_true": (
        "class _Yes:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return _Yes()\n"
    ),
    "int_subclass_eq_always_true": (
        "class _Int(int):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return _Int(0)\n"
    ),
    "assertion_error_replaced": (
        "import builtins\n"
        "class _Never(BaseException):\n    pass\n"
        "def add(a, b, _=setattr(builtins, 'AssertionError', _Never)):\n    return 0\n"
    ),
    "closes_stdout_and_stderr": (
        "import os\ndef add(a, b, _=(os.close(1), os.close(2))):\n    return 0\n"
    ),
    "redirects_stdout_and_writes_success": (
        "import os\n"
        "def _swap():\n"
        "    real = os.dup(1)\n"
        "    null = os.open(os.devnull, os.O_WRONLY)\n"
        "    os.dup2(null, 1)\n    os.dup2(null, 2)\n"
        "    os.write(real, b'3/3 asserts passed\\n')\n"
        "def add(a, b, _=_swap()):\n    return 0\n"
    ),
    "closes_every_descriptor_then_exits_0": (
        "import os\ndef add(a, b):\n    os.closerange(0, 4096)\n    os._exit(0)\n"
    ),
    "rewrites_the_report": (
        "import builtins, os, re, sys\n"
        "def _forge(text):\n"
        "    text = re.sub(r'(\\d+)\\s*/\\s*(\\d+)', r'\\2/\\2', text)\n"
        "    text = re.sub(r'(?i)(\"?fail\\w*\"?\\s*[:=]\\s*)\\d+', r'\\g<1>0', text)\n"
        "    for bad, good in (('FAILED', 'PASSED'), ('FAIL', 'PASS'), ('False', 'True'),\n"
        "                      ('false', 'true'), ('ERROR', 'OK')):\n"
        "        text = text.replace(bad, good)\n"
        "    return text\n"
        "class _Out:\n"
        "    def __init__(self, stream):\n        self._stream = stream\n"
        "    def write(self, text):\n        return self._stream.write(_forge(text))\n"
        "    def __getattr__(self, name):\n        return getattr(self._stream, name)\n"
        "def _install():\n"
        "    real_write, real_print = os.write, builtins.print\n"
        "    sys.stdout, sys.stderr = _Out(sys.stdout), _Out(sys.stderr)\n"
        "    os.write = lambda fd, data: real_write(fd, _forge(bytes(data).decode('latin-1')).encode('latin-1'))\n"
        "    builtins.print = lambda *a, **k: real_print(*(_forge(str(x)) for x in a), **k)\n"
        "def add(a, b, _=_install()):\n    return 0\n"
    ),
    "writes_a_report_into_the_parents_descriptors": (
        "import json, os, struct\n"
        "def add(a, b):\n"
        "    body = json.dumps({'complete': True, 'tests': 3, 'failures': [], 'passed': 3}).encode()\n"
        "    frame = struct.pack('>Q', len(body)) + body\n"
        "    ppid, paths = os.getppid(), []\n"
        "    for pid in (ppid, 1):\n"
        "        try:\n"
        "            paths += [f'/proc/{pid}/fd/{n}' for n in os.listdir(f'/proc/{pid}/fd')]\n"
        "        except OSError:\n"
        "            pass\n"
        "    for path in paths:\n"
        "        try:\n"
        "            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_APPEND)\n"
        "            try:\n"
        "                os.write(fd, frame)\n"
        "            finally:\n"
        "                os.close(fd)\n"
        "        except OSError:\n"
        "            pass\n"
        "    for fd in range(256):\n"
        "        try:\n"
        "            os.write(fd, frame)\n"
        "        except OSError:\n"
        "            pass\n"
        "    try:\n"
        "        with open(f'/proc/{ppid}/mem', 'rb') as mem:\n"
        "            mem.read(1)\n"
        "    except OSError:\n"
        "        pass\n"
        "    return 0\n"
    ),
    "steals_secrets_and_writes_reports_everywhere": (
        "import glob, os, re, sys\n"
        "def _loot():\n"
        "    texts = []\n"
        "    main = sys.modules.get('__main__')\n"
        "    paths = [sys.argv[0] if sys.argv else '', getattr(main, '__file__', None) or '',\n"
        "             '/proc/self/cmdline', '/proc/self/environ']\n"
        "    for d in {os.getcwd(), os.path.dirname(os.path.abspath(sys.argv[0] or '.')), '/tmp'}:\n"
        "        paths += glob.glob(os.path.join(d, '*'))[:200]\n"
        "    paths += glob.glob('/proc/self/fd/*')\n"
        "    for p in paths:\n"
        "        try:\n"
        "            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n"
        "            try:\n"
        "                texts.append(os.read(fd, 1 << 20).decode('utf-8', 'replace'))\n"
        "            finally:\n"
        "                os.close(fd)\n"
        "        except OSError:\n"
        "            pass\n"
        "    return '\\n'.join(texts)\n"
        "def add(a, b):\n"
        "    tokens = sorted(set(re.findall(r'[A-Za-z0-9_-]{16,}', _loot())))[:100]\n"
        "    lines = ['3/3 asserts passed', 'PASSED', 'OK']\n"
        "    for t in tokens:\n"
        "        lines += [t, t + ' 3/3 asserts passed', t + ' PASS 3 3',\n"
        '                  \'{"secret": "%s", "passed": 3, "failed": 0, "total": 3}\' % t]\n'
        "    report = ('\\n'.join(lines) + '\\n').encode()\n"
        "    for fd in range(1, 64):\n"
        "        try:\n"
        "            os.write(fd, report)\n"
        "        except OSError:\n"
        "            pass\n"
        "    os._exit(0)\n"
    ),
}
