"""`python -m minbert classroom <student|grade|autograder|check|allowlists>`: the instructor's commands (--help)."""

import argparse
import signal
import sys
from pathlib import Path

from minbert.classroom.assignments import BY_KEY, ROOT, student
from minbert.classroom.results import results_json, table, write_json
from minbert.classroom.sandbox import LEVELS
from minbert.core import flags
from minbert.core.errors import UserError, cli

def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m minbert classroom", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("student", help="write a student copy with the solutions removed")
    s.add_argument("out", type=Path, help="a new (or empty) folder for the copy; hand it to students as is")
    s.add_argument("--assignments", default=",".join(BY_KEY),
                   help=f"comma-separated keys to remove, in any order (default all): {','.join(BY_KEY)}")
    g = sub.add_parser("grade", help="grade a submission (repository, minbert/ folder or loose files); prints a table")
    g.add_argument("dir", nargs="?", type=Path, default=ROOT, help="the submission (default: this repository)")
    g.add_argument("--json", type=Path, default=None, help="also write Gradescope's results.json here")
    g.add_argument("--assignments", default=None, help="grade only these comma-separated keys (default all)")
    g.add_argument("--handout", default=None,
                   help="the keys the hand-out removed, when it was built with student --assignments (default all)")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds per assignment's child process (default 60)")
    g.add_argument("--workers", type=int, default=2, help="assignments graded at once (default 2)")
    g.add_argument("--salt", type=int, default=None,
                   help="the secret mixed into each submission's seed (default: a fresh random one, printed with the "
                        "grade; pass it again to regrade with the same cases). The Gradescope zip carries its own")
    g.add_argument("--require_isolation", default=None, metavar="LEVEL",
                   help=f"the weakest isolation accepted, else refuse: {', '.join(LEVELS)} (weakest first; default "
                        "'user+chroot' as root, 'self-check' as an ordinary user); 'grade' prints the layers it had")
    z = sub.add_parser("autograder", help="write the Gradescope autograder zip")
    z.add_argument("out", type=Path, help="a new folder; the zip goes there")
    z.add_argument("--assignments", default=None, help="only these keys (default all)")
    c = sub.add_parser("check", help="before release: leak scan, 0 and full grades, the exploits")
    c.add_argument("--assignments", default=None, help=argparse.SUPPRESS)
    w = sub.add_parser("allowlists", help="record what each reference solution runs and compare with its record's "
                                          "allow-lists (after changing a reference or the harness)")
    w.add_argument("--assignments", default=None, help="only these keys (default all)")
    w.add_argument("--write", action="store_true", help="rewrite minbert/classroom/allowlists_recorded.json with what "
                                                       "the references run (review the diff before committing)")
    args = p.parse_args(argv)
    keys = None if args.assignments is None else {k.strip() for k in args.assignments.split(",") if k.strip()}
    unknown = sorted((keys or set()) - set(BY_KEY))
    if unknown:
        raise UserError(f"--assignments: {flags.unknown('assignment', unknown[0], BY_KEY)}")
    if args.command == "student":
        removed = student(args.out, keys)
        print(f"wrote {args.out}: {sum(map(len, removed.values()))} solution lines removed from "
              f"{sum(1 for v in removed.values() if v)} files (one git commit); grade it with: "
              f"python -m minbert classroom grade {args.out}")
        return
    if args.command == "allowlists":
        from minbert.classroom import allowlist_recording
        sys.exit(allowlist_recording.main(keys, args.write))
    from minbert.classroom import autograder, grade as G
    if args.command == "autograder":
        print(f"wrote {autograder.build(args.out, keys)}")
        return
    if args.command == "check":
        sys.exit(autograder.check(keys))
    if not args.dir.exists():
        raise UserError(f"grade: {args.dir} does not exist; pass a repository, a minbert/ folder or the graded files")
    handout = None if not getattr(args, "handout", None) else {k.strip() for k in args.handout.split(",") if k.strip()}
    if handout and handout - set(BY_KEY):
        raise UserError(f"--handout: {flags.unknown('assignment', sorted(handout - set(BY_KEY))[0], BY_KEY)}")
    try:
        entries = G.grade(args.dir, keys, timeout=args.timeout, workers=args.workers, handout=handout,
                          require_isolation=args.require_isolation, salt=args.salt)
    except KeyboardInterrupt as e:     # Ctrl-C, SIGTERM, SIGHUP (cleanup.Stopped): raised after the grade's cleanup
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"grade: stopped by {signal.Signals(signum).name} before the grade was complete; nothing was written "
              "(the boxes and the grade's temporary folder are gone)", file=sys.stderr)
        sys.exit(128 + signum)
    print(table(entries))
    if args.json:
        write_json(args.json, results_json(entries))


if __name__ == "__main__":
    cli(main)
