"""A small repo in Python, JavaScript, TypeScript and Go, for the code navigation tools.

Line numbers matter to the tests and are noted beside the definitions. Decoys: the name
`retry` also appears in a comment and a string, a secret-named file and a .gitignored file
define names that must never be found.
"""

from __future__ import annotations

POLYGLOT: dict[str, str | bytes] = {
    "README.md": "# shop\n\nPayments, a web front end and a Go worker.\n",
    ".gitignore": "build/\n",
    "payments/retry.py": (
        "import time\n"  # 1
        "\n"
        "MAX_ATTEMPTS = 5\n"  # 3
        "\n"
        "\n"
        "def retry(call, attempts=MAX_ATTEMPTS):\n"  # 6
        '    """Call `call` until it succeeds."""\n'
        "    for attempt in range(attempts):\n"
        "        try:\n"
        "            return call()\n"
        "        except ConnectionError:\n"
        "            time.sleep(2**attempt)\n"
        "    raise RuntimeError('gave up')\n"  # 13
        "\n"
        "\n"
        "class Queue:\n"  # 16
        "    def enqueue(self, job):\n"  # 17
        "        return retry(lambda: job)\n"  # 18
    ),
    "payments/api.py": (
        "from payments.retry import Queue, retry\n"  # 1
        "\n"
        "# retry is only mentioned in this comment\n"  # 3
        'MESSAGE = "retry later"\n'  # 4
        "\n"
        "\n"
        "def charge(card):\n"  # 7
        "    return retry(lambda: card)\n"  # 8
        "\n"
        "\n"
        "def schedule(job):\n"
        "    return Queue().enqueue(job)\n"  # 12
    ),
    "web/src/shapes.ts": (
        "export interface Shape {\n"  # 1
        "  area(): number;\n"
        "}\n"
        "\n"
        "export class Square implements Shape {\n"  # 5
        "  constructor(private side: number) {}\n"
        "  area(): number {\n"  # 7
        "    return this.side * this.side;\n"
        "  }\n"
        "}\n"
    ),
    "web/src/main.ts": (
        "import { Shape, Square } from './shapes';\n"  # 1
        "\n"
        "export function total(shapes: Shape[]): number {\n"  # 3
        "  return shapes.reduce((sum, s) => sum + s.area(), 0);\n"
        "}\n"
        "\n"
        "console.log(total([new Square(2)]));\n"  # 7
    ),
    "web/src/format.js": (
        "export function formatPrice(cents) {\n"  # 1
        "  return `$${(cents / 100).toFixed(2)}`;\n"
        "}\n"
        "\n"
        "export const slugify = (text) => text.toLowerCase().replace(/\\s+/g, '-');\n"  # 5
    ),
    "worker/retry/backoff.go": (
        "package retry\n"  # 1
        "\n"
        'import "time"\n'
        "\n"
        "// Backoff doubles the wait after each failure.\n"
        "type Backoff struct {\n"  # 6
        "\tBase time.Duration\n"
        "\tsteps int\n"
        "}\n"
        "\n"
        "// Next returns the wait before the next attempt.\n"
        "func (b *Backoff) Next() time.Duration {\n"  # 12
        "\tb.steps++\n"
        "\treturn b.Base << b.steps\n"
        "}\n"
        "\n"
        "// Do calls fn until it succeeds or attempts run out.\n"
        "func Do(fn func() error, attempts int) error {\n"  # 18
        "\tb := &Backoff{Base: time.Millisecond}\n"
        "\tvar err error\n"
        "\tfor i := 0; i < attempts; i++ {\n"
        "\t\tif err = fn(); err == nil {\n"
        "\t\t\treturn nil\n"
        "\t\t}\n"
        "\t\ttime.Sleep(b.Next())\n"  # 25
        "\t}\n"
        "\treturn err\n"
        "}\n"
    ),
    "worker/main.go": (
        "package main\n"
        "\n"
        'import "example.com/shop/worker/retry"\n'
        "\n"
        "func main() {\n"
        "\t_ = retry.Do(func() error { return nil }, 3)\n"  # 6
        "}\n"
    ),
    ".env.py": "def planted_secret_function():\n    return 'never indexed'\n",
    "keys/id_rsa_loader.py": "def planted_key_loader():\n    return None\n",
    "build/generated.py": "def generated_only():\n    return 1\n",
}
