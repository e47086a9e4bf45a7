"""Secret: named credentials kept encrypted by the daemon; no call ever returns a value."""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Union
from urllib.parse import quote

from ._http import Client
from .errors import InvalidArgument


def _path(name: str) -> str:
    return "/v1/secrets/" + quote(name, safe="")


def _values(values: Any) -> Dict[str, str]:
    # Errors name keys and types, never a value.
    if not isinstance(values, Mapping) or not values:
        raise InvalidArgument("values: a non-empty dict of str keys to str values", "invalid_argument")
    for k, v in values.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidArgument("values: key %r: keys and values must be str (got a %s value)"
                                  % (k if isinstance(k, str) else type(k).__name__, type(v).__name__),
                                  "invalid_argument")
    return dict(values)


class Secret:
    """A stored secret (``corral secret``): keys and values the daemon keeps encrypted.

    Give its values to a sandbox's processes as env (``Sandbox.create(secrets=
    [s])``, ``exec(secrets=[...])``), or keep them out of the sandbox
    entirely: ``secret_headers=[s.header("TOKEN", "api.example.com")]`` makes
    the egress proxy add the header to that host's requests. ``keys`` lists
    its keys; no method returns a value.
    """

    def __init__(self, client: Client, info: Dict[str, Any]) -> None:
        self._client = client
        self.info = info
        self.name: str = info["name"]

    def __repr__(self) -> str:
        return "Secret(%s, keys=%s)" % (self.name, self.keys)

    @property
    def keys(self) -> List[str]:
        """Its keys (never values), as last reported."""
        return list(self.info.get("keys") or [])

    @classmethod
    def create(cls, name: str, values: Mapping[str, str], client: Optional[Client] = None) -> "Secret":
        """Stores ``values`` (env-style keys to str values) as secret ``name`` (``Conflict`` if it exists)."""
        if not isinstance(name, str) or not name:
            raise InvalidArgument("secret name: a non-empty str", "invalid_argument")
        c = client or Client()
        return cls(c, c.call("POST", "/v1/secrets", payload={"name": name, "values": _values(values)}))

    @classmethod
    def from_name(cls, name: str, client: Optional[Client] = None) -> "Secret":
        """The secret called ``name`` (raises ``NotFound``)."""
        if not isinstance(name, str) or not name:
            raise InvalidArgument("secret name: a non-empty str", "invalid_argument")
        c = client or Client()
        return cls(c, c.call("GET", _path(name)))

    @classmethod
    def list(cls, client: Optional[Client] = None) -> "List[Secret]":
        """Every secret's name and keys."""
        c = client or Client()
        out = c.call("GET", "/v1/secrets") or {}
        return [cls(c, s) for s in out.get("secrets") or []]

    def rotate(self, values: Mapping[str, str]) -> None:
        """Replaces all its values. Running sandboxes keep the env they started
        with; header injection uses the new values from the next request."""
        self.info = self._client.call("PUT", _path(self.name), payload={"values": _values(values)}) or self.info

    def remove(self) -> None:
        """Deletes the secret (header injection from it stops)."""
        self._client.call("DELETE", _path(self.name))

    def header(self, key: str, host: str, header: str = "Authorization",
               template: Optional[str] = None) -> Dict[str, str]:
        """An egress header rule for ``Sandbox.create(secret_headers=[...])``: TLS
        requests to ``host`` (port 443; GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS;
        never plain HTTP, never TRACE) get ``header`` set to ``template`` with
        "{value}" replaced by this secret's ``key`` (default template: the value alone)."""
        rule = {"secret": self.name, "key": key, "host": host, "header": header}
        if template:
            rule["template"] = template
        return rule


def secret_names(secrets: Optional[Sequence[Union[str, Secret]]]) -> Optional[List[str]]:
    """The API's ``secrets`` from names or ``Secret`` objects."""
    if not secrets:
        return None
    if isinstance(secrets, (str, bytes)):
        raise InvalidArgument("secrets: a list of names, not a string", "invalid_argument")
    out = []
    for s in secrets:
        s = getattr(s, "sync", s)  # an aio AsyncSecret
        name = s.name if isinstance(s, Secret) else s
        if not isinstance(name, str) or not name:
            raise InvalidArgument("secrets: each is a name or a Secret, not a %s" % type(s).__name__, "invalid_argument")
        out.append(name)
    return out
