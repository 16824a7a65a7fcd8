"""What git may do for the git store: run no program a clone names, and put no secret on
a command line.

git runs what a repository tells it to -- its hooks, and the programs its config names --
and ``_gitcache`` makes sure nobody but this user could have written the clone. Even so,
git is told not to listen, so that a clone that got something planted in it anyway (by
hand, by an older tool) runs none of it:

* every command runs with hooks pointed nowhere (``core.hooksPath=/dev/null``), no
  fsmonitor and no signing program (``GUARDS``, given on the command line, which wins over
  any config), no protocol but those a store URL may name (``GIT_ALLOW_PROTOCOL``: no
  ``ext::`` command and no remote helper, whatever a config asks), no askpass program, and
  SSH as ``GIT_SSH_COMMAND`` says (always set, so a ``core.sshCommand`` is never read);
  ``_gitcli`` also names ``git-upload-pack`` and ``git-receive-pack`` on the command line
  of each fetch and push (a ``-c`` would not do: git takes the *first* of several
  ``remote.origin.uploadpack``, and that is the clone's);
* what cannot be overridden, only left out -- a ``credential.helper`` (the user's own
  must keep working), an ``include.path``, a ``url.*.insteadOf`` -- is found by listing
  the clone's own config: it may hold only the settings ``git init`` and ``reclone`` write
  there (``foreign_settings``), and a clone with any other is made again, with a warning.
  The user's own config (``~/.gitconfig``) is theirs, and still applies;
* a user or password in the store URL goes neither into the clone's config nor on any
  command line, where every user of the machine reads it in the process list: git is given
  the URL without it (``split_credentials``), and a credential helper that answers from the
  git process's environment, which only this user and root can read, for the remote's
  host only (``git_environment``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote

from shoal.text import safe

__all__ = [
    "GUARDS",
    "PROTOCOLS",
    "Credentials",
    "foreign_settings",
    "git_environment",
    "split_credentials",
]

#: The protocols git may speak for a store: those a store URL may name (``parse_git_url``).
PROTOCOLS = ("file", "ssh", "https", "http")
#: Given to every git command, over whatever any config says: no hook runs whatever the
#: clone's ``hooks/`` holds, and neither an fsmonitor nor a signing program is started.
GUARDS = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "commit.gpgSign=false",
    "push.gpgSign=false",
)
#: Everything a clone's own config may hold: what ``git init --bare`` writes (on any
#: platform and object format), what ``reclone`` adds, and gc's pacing.
_OWN_SETTINGS = frozenset(
    {
        "core.repositoryformatversion",
        "core.filemode",
        "core.bare",
        "core.ignorecase",
        "core.precomposeunicode",
        "core.symlinks",
        "core.logallrefupdates",
        "extensions.objectformat",
        "extensions.refstorage",
        "remote.origin.url",
        "remote.origin.fetch",
        "fetch.writecommitgraph",
        "gc.auto",
        "gc.autodetach",
    }
)
#: The credential helper git is given when the store URL carries a user or password: it
#: answers git's "get" from the environment of the git process (readable by this user
#: only), so the secret is on no command line and in no file.
_HELPER = (
    '!f() { if test "$1" = get; then printf "username=%s\\npassword=%s\\n" '
    '"$SHOAL_GIT_USERNAME" "$SHOAL_GIT_PASSWORD"; fi; }; f'
)


@dataclass(frozen=True, slots=True)
class Credentials:
    """A store URL's remote split for git: the URL git is told (no secret in it), and the
    user and password that were in it, which go to git through the environment."""

    url: str
    username: str | None = None
    password: str | None = None
    #: What must never show in a message: the password, and over http(s) the user (often
    #: a token), as written and percent-decoded, longest first.
    secrets: tuple[str, ...] = ()


def split_credentials(remote: str) -> Credentials:
    """``remote`` without its user and password, and those apart. The user part ends at
    the *last* ``@`` (as ``shown_url`` reads it): a password with an unescaped ``/`` or
    ``?`` is still a password (an ``@`` in a path is written ``%40``). Over ssh the user
    stays in the URL (``git@host`` is no secret, and ssh cannot take a password); over
    http(s) both go, and come back through the credential helper."""
    scheme, sep, rest = remote.partition("://")
    if not sep or "@" not in rest or rest.startswith("/"):
        return Credentials(remote)
    userinfo, _, after = rest.rpartition("@")
    user, colon, password = userinfo.partition(":")
    web = scheme in ("http", "https")
    written = {password, *([user] if web else [])} - {""}
    secrets = tuple(sorted(written | {unquote(s) for s in written}, key=len, reverse=True))
    if web and (user or colon):
        return Credentials(f"{scheme}://{after}", unquote(user), unquote(password), secrets)
    if colon and not web:
        return Credentials(f"{scheme}://{user}@{after}", secrets=secrets)
    return Credentials(remote)


#: The user part of a URL inside a config key (``url.https://u:p@host/.insteadof``).
_USERINFO = re.compile(r"//[^/]*@")


def foreign_settings(listed: bytes) -> tuple[list[str], dict[str, list[str]]]:
    """The keys of ``git config --list -z`` output that shoal never puts in a clone's
    config (fit to show: escaped, no user part of a URL), and every setting it lists."""
    settings: dict[str, list[str]] = {}
    for entry in listed.decode("utf-8", "surrogateescape").split("\0"):
        if entry:
            key, _, value = entry.partition("\n")
            settings.setdefault(key, []).append(value)
    foreign = sorted(set(settings) - _OWN_SETTINGS)
    return [_USERINFO.sub("//***@", safe(key, one_line=True)) for key in foreign], settings


def git_environment(
    credentials: Credentials, environ: Mapping[str, str]
) -> tuple[list[str], dict[str, str]]:
    """The ``-c`` options to put before every git command, and its environment (from
    ``environ``, the process's own): the guards, no prompt, a fixed locale, SSH in batch
    mode, and the URL's credentials for its credential helper."""
    allowed = environ.get("GIT_ALLOW_PROTOCOL")  # a narrower list of the user's stays
    protocols = [p for p in PROTOCOLS if allowed is None or p in allowed.split(":")]
    env = {
        **environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",  # set, even empty: git then never runs a core.askPass
        "SSH_ASKPASS": "",
        "LC_ALL": "C",
        "GIT_SSH_COMMAND": environ.get("GIT_SSH_COMMAND") or "ssh -o BatchMode=yes",
        "GIT_ALLOW_PROTOCOL": ":".join(protocols),
    }
    options = [arg for guard in GUARDS for arg in ("-c", guard)]
    if credentials.username is not None:
        scheme, _, rest = credentials.url.partition("://")
        host = rest.partition("/")[0]
        env["SHOAL_GIT_USERNAME"] = credentials.username
        env["SHOAL_GIT_PASSWORD"] = credentials.password or ""
        # The user's helpers are dropped (an empty value), so none of them stores the
        # secret or answers in its place; ours answers for the remote's host only.
        options += [
            "-c",
            "credential.helper=",
            "-c",
            f"credential.{scheme}://{host}.helper={_HELPER}",
        ]
    return options, env
