"""Lockstep participants: which outputs the physics clock waits for, and until when.

A *participant* is a topic whose messages start with a ``std_msgs/Header`` stamped on a
fixed grid of simulation time: output ``k`` is stamped ``d_k = first_s + k / rate_hz``
(``k = 0, 1, ...``) and can be produced once the simulation clock has reached
``d_k + lag_s`` (a sensor resampling ground truth to ``k / rate_hz``: lag 0; a GPS whose
first fix comes out ``latency_s`` after start: ``first_s = latency_s``; a lidar sweep
stamped at its start and complete one sweep later: ``lag_s = 1 / sweeps per second``).
A participant may stamp an output later than ``d_k`` (the camera renders at the first
ground-truth stamp at or after ``d_k``): the rule only asks for a stamp at or after ``d_k``.

The rule (issue 11, "lockstep for the whole graph"): the clock may step from ``t`` only
when every participant's newest stamp is at or after its *awaited stamp* at ``t``, the
last ``d_k`` with ``d_k + lag_s <= t``. So the clock never passes a participant's next
due time before it has produced its output for the previous one, whatever the load, and
a slow participant slows the simulation instead of losing samples.

A participant counts from the moment the physics node reads its topic (*armed*): before
that it holds the clock (a driver that never comes is waited for, and logged, not
skipped); once armed at clock ``t_arm`` it owes the due stamps after ``t_arm`` only (an
output sent before its reader was there is lost to it). Armed before the first state
went out, it owes every stamp from ``first_s``.

Entries cannot be forged into a stall (issue 32). An announced entry has an *owner*, the
process that announced it: it cannot replace an entry of another owner (nor one of the
physics node's own parameter), it is honoured only while its announcer is in the graph
and expires with it, and once its topic is published, only if the announcer's process is
among the publishers (the node adapter checks those two). And a participant that holds
the clock without a new output for ``timeout_s`` of wall time is dropped
(:meth:`LockstepGate.overdue`): the physics node reports it as an ERROR, and the clock
goes on without it (a batch counts such a run as failed: :data:`DROPPED_MARKER`).

Only nodes of this launch may announce (issue 32): ``aerial_sim launch`` gives its processes a
random key (:data:`KEY_VARIABLE`, one per launch unless the environment already names one), and an
announcement carries ``#`` and an HMAC-SHA256 of the entry, the announcing node's name and the GID of
the publisher that sends it under that key (:func:`sign_entry`). A physics node that has the key takes
only entries whose signature matches the announcer's name as the graph gives it and the GID the
announcement came from (:func:`signature_matches`): a node outside the launch, even one that
publishes the topic it announces, is refused at once; a signed entry replayed from another node's
publisher does not match that node's name, and one replayed by a node that took the very name of an
announcer that has left does not match its publisher's GID (unique to a publisher of a process: the
process's DDS participant and the publisher's place in it). Without a key (``ros2 launch``
without the variable, or the variable set empty) the rules above are the whole defence.

Entries are written ``TOPIC@RATE_HZ[:FIRST_S[:LAG_S]]`` (``/drone1/imu/data@200``,
``/drone1/gps/fix@50:0.2``), the same text in the physics node's ``lockstep_participants``
parameter and in what a node announces on ``/lockstep/participants``.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import threading
from dataclasses import dataclass

from aerial_sim.config import ParamsError

#: Stamps within this of the awaited one count as on time (to_stamp rounds to whole ns).
STAMP_TOLERANCE_NS = 1_000
#: What :meth:`LockstepGate.clear_below_ns` keeps short of the exact clock (ns): far more than the rounding
#: of the participants' rule in floating point, far less than a lockstep period.
CLEAR_MARGIN_NS = 1_000_000
#: Bounds of an entry (an announcement is a message anyone can send: 1e300 Hz must not overflow the
#: stamp arithmetic in the simulation loop). No participant outputs faster than physics steps.
MAX_RATE_HZ = 10_000.0
MAX_OFFSET_S = 1e6
#: Longest topic name an entry may give (a 1 MB name was accepted, and logged, whole).
MAX_TOPIC_CHARS = 256
#: Start of the physics node's ERROR line when it drops a participant (``aerial_sim batch`` fails such a run).
DROPPED_MARKER = "lockstep: participant dropped"

#: ``frame_id`` of a lockstep participant's last Header (``mission/progress``) when its node ends the run: its
#: stamp is the last it produced. A recorder then ends its bag a fixed time before it (its ``order_window_s``),
#: where every output of the run was waited for and none of the shutdown's timing is left (issue 32).
END_OF_RUN_FRAME = "end_of_run"
#: Environment variable holding the launch's lockstep key (hex); empty: announcements are not signed.
KEY_VARIABLE = "AERIAL_SIM_LOCKSTEP_KEY"
#: What separates an announced entry from its signature.
SIGNATURE_SEPARATOR = "#"

_TOPIC = re.compile(r"^/[A-Za-z0-9_/~]+$")


def shorten(text: str, limit: int = 80) -> str:
    """``text`` for a log line: cut to ``limit`` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class EntryRefused(ParamsError):
    """An announced entry that may not be taken (its topic is another owner's)."""


@dataclass(frozen=True)
class Participant:
    """One awaited output stream (see the module doc for the meaning of the fields)."""

    topic: str
    rate_hz: float
    first_s: float = 0.0
    lag_s: float = 0.0

    def __post_init__(self) -> None:
        if len(self.topic) > MAX_TOPIC_CHARS:
            raise ParamsError(f"lockstep participant topic must be at most {MAX_TOPIC_CHARS} characters, got "
                              f"{shorten(self.topic, 40)!r}")
        if not _TOPIC.match(self.topic) or "//" in self.topic or self.topic.endswith("/"):
            raise ParamsError(f"lockstep participant topic must be an absolute ROS name, got {self.topic!r}")
        for name in ("rate_hz", "first_s", "lag_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0 or (name == "rate_hz" and value == 0):
                raise ParamsError(f"lockstep participant {self.topic}: {name} must be a finite "
                                  f"{'positive' if name == 'rate_hz' else 'non-negative'} number, got {value!r}")
            limit = MAX_RATE_HZ if name == "rate_hz" else MAX_OFFSET_S
            if value > limit:
                raise ParamsError(f"lockstep participant {self.topic}: {name} must be at most {limit:g}, got {value!r}")

    @classmethod
    def parse(cls, text: str) -> "Participant":
        """``TOPIC@RATE_HZ[:FIRST_S[:LAG_S]]`` -> Participant; a ParamsError says what is wrong."""
        topic, at, numbers = text.strip().partition("@")
        fields = numbers.split(":") if at else []
        if not at or not 1 <= len(fields) <= 3:
            raise ParamsError(f"lockstep participant {shorten(text)!r}: write TOPIC@RATE_HZ[:FIRST_S[:LAG_S]]")
        try:
            values = [float(f) for f in fields]
        except ValueError:
            raise ParamsError(f"lockstep participant {shorten(text)!r}: rate, first and lag must be numbers") from None
        return cls(topic, *values)

    def text(self) -> str:
        """The entry as written in parameters and announcements (inverse of :meth:`parse`)."""
        return f"{self.topic}@{self.rate_hz:g}:{self.first_s:g}:{self.lag_s:g}"

    def first_clock_owing_ns(self, produced_ns: float) -> float:
        """A clock (ns) at or before the first at which :meth:`awaited_stamp_ns` is a stamp later than
        ``produced_ns`` (-inf: nothing produced): below it, this participant owes nothing it has not produced.
        Within a microsecond of the exact clock, on the safe side (:meth:`LockstepGate.clear_below_ns`
        keeps a millisecond more)."""
        k = 0
        if produced_ns != -math.inf:
            k = max(0, math.floor((produced_ns * 1e-9 - self.first_s) * self.rate_hz) - 1)
            while round((self.first_s + k / self.rate_hz) * 1e9) <= produced_ns:
                k += 1
        if k == 0:  # the first due stamp: awaited from elapsed >= -STAMP_TOLERANCE
            return (self.lag_s + self.first_s) * 1e9 - STAMP_TOLERANCE_NS
        return ((k - 1e-6) / self.rate_hz + self.lag_s + self.first_s) * 1e9

    def awaited_stamp_ns(self, clock_ns: int) -> int | None:
        """The last due stamp producible at clock ``clock_ns`` (ns), or None before the first one."""
        elapsed_s = clock_ns * 1e-9 - self.lag_s - self.first_s
        if elapsed_s < -STAMP_TOLERANCE_NS * 1e-9:
            return None
        k = math.floor(elapsed_s * self.rate_hz + 1e-6)
        return round((self.first_s + max(k, 0) / self.rate_hz) * 1e9)


def parse_participants(text: str) -> tuple[Participant, ...]:
    """Entries separated by spaces or commas (an empty text, or ``none`` as launch files write it, is none)."""
    if text.strip().lower() == "none":
        return ()
    return tuple(Participant.parse(entry) for entry in re.split(r"[\s,]+", text.strip()) if entry)


@dataclass(frozen=True)
class Holdup:
    """A participant that holds the clock: the stamp it owes and the newest it produced (None: nothing yet)."""

    participant: Participant
    awaited_ns: int
    latest_ns: int | None

    def describe(self) -> str:
        latest = "nothing yet" if self.latest_ns is None else f"newest {self.latest_ns * 1e-9:.3f} s"
        return f"{self.participant.topic} (stamp {self.awaited_ns * 1e-9:.3f} s; {latest})"


class LockstepGate:
    """The participants and their newest output stamps; thread-safe (stamps arrive in callbacks)."""

    #: Owner of the entries given by the physics node's own ``lockstep_participants`` parameter.
    CONFIGURED = "the lockstep_participants parameter"

    def __init__(self, participants: tuple[Participant, ...] = ()):
        self._lock = threading.Lock()
        self._participants: dict[str, Participant] = {}
        self._owners: dict[str, str] = {}
        self._latest_ns: dict[str, int] = {}
        self._armed_since_ns: dict[str, int] = {}
        self._held_since: dict[str, tuple[float, int | None]] = {}  # topic -> (wall s, newest stamp then)
        #: Counts the changes that may hold the clock sooner or later (entries, arming, stamps, restarts):
        #: :meth:`clear_below_ns` of an unchanged version stays true.
        self.version = 0
        for participant in participants:
            self.add(participant, self.CONFIGURED)

    def add(self, participant: Participant, owner: str = CONFIGURED) -> bool:
        """Await ``participant`` from now on; true when new or changed. Its owner may change its
        entry; an entry of another owner raises :class:`EntryRefused` (naming that owner)."""
        with self._lock:
            held_by = self._owners.get(participant.topic)
            if held_by is not None and held_by != owner:
                raise EntryRefused(f"lockstep participant {participant.topic} is {held_by}'s entry: "
                                   f"{shorten(participant.text())} may not replace it")
            changed = self._participants.get(participant.topic) != participant
            self._participants[participant.topic] = participant
            self._owners[participant.topic] = owner
            self.version += 1
            return changed

    def owner(self, topic: str) -> str | None:
        with self._lock:
            return self._owners.get(topic)

    def remove(self, topic: str) -> Participant | None:
        """Stop awaiting ``topic`` (it expired or was dropped); its entry, or None."""
        with self._lock:
            for table in (self._owners, self._latest_ns, self._armed_since_ns, self._held_since):
                table.pop(topic, None)
            self.version += 1
            return self._participants.pop(topic, None)

    def owned_by(self, owner: str) -> list[Participant]:
        with self._lock:
            return [p for t, p in self._participants.items() if self._owners.get(t) == owner]

    def arm(self, topic: str, since_ns: int) -> None:
        """``topic`` is read from now on: it owes the due stamps after ``since_ns`` (-1: all)."""
        with self._lock:
            self._armed_since_ns.setdefault(topic, since_ns)
            self.version += 1

    def armed(self, topic: str) -> bool:
        with self._lock:
            return topic in self._armed_since_ns

    def restart(self) -> None:
        """A new run from clock 0: the stamps seen so far are forgotten, and every participant read now
        owes each due stamp from its first again, as one armed before a fresh run's first state does."""
        with self._lock:
            self._latest_ns.clear()
            self._held_since.clear()
            for topic in self._armed_since_ns:
                self._armed_since_ns[topic] = -1
            self.version += 1

    def participants(self) -> list[Participant]:
        with self._lock:
            return list(self._participants.values())

    def observe(self, topic: str, stamp_ns: int) -> None:
        """``topic`` produced an output stamped ``stamp_ns``."""
        with self._lock:
            if stamp_ns > self._latest_ns.get(topic, -1):
                self._latest_ns[topic] = stamp_ns
                self.version += 1

    def overdue(self, clock_ns: int, now_s: float, timeout_s: float, also_held: tuple[Holdup, ...] = ()) -> list[Holdup]:
        """The participants that have held the clock at ``clock_ns`` (or, ``also_held``, at another clock:
        the physics node's feedback participants, awaited without the slack) for ``timeout_s`` of wall time
        (``now_s``, any monotonic clock) without producing a new output: silent, not just slow
        (each new output starts the wait again). ``timeout_s`` 0 or less: none ever is."""
        held = list({h.participant.topic: h for h in [*self.holdups(clock_ns), *also_held]}.values())
        with self._lock:
            stale = []
            for holdup in held:
                topic = holdup.participant.topic
                since = self._held_since.get(topic)
                if since is None or since[1] != holdup.latest_ns:
                    self._held_since[topic] = (now_s, holdup.latest_ns)
                elif timeout_s > 0 and now_s - since[0] >= timeout_s:
                    stale.append(holdup)
            for topic in set(self._held_since) - {h.participant.topic for h in held}:
                del self._held_since[topic]
            return stale

    def clear_below_ns(self) -> float:
        """A clock (ns) below which :meth:`holdups` is empty on what the participants have produced so far:
        a millisecond short of the first clock at which one of them owes a stamp it has not produced
        (inf: no participant). The simulation thread looks at the holdups only from there on (issue 34: a
        lockstep period looked at each participant's rule, and the participants run lockstep_slack_s behind)."""
        with self._lock:
            bound = math.inf
            for topic, participant in self._participants.items():
                latest = self._latest_ns.get(topic)
                produced = max(self._armed_since_ns.get(topic, -math.inf),
                               -math.inf if latest is None else latest + STAMP_TOLERANCE_NS)
                bound = min(bound, participant.first_clock_owing_ns(produced))
            return bound - CLEAR_MARGIN_NS

    def holdups(self, clock_ns: int, topics=None) -> list[Holdup]:
        """The participants (of ``topics`` only, when given) that have not yet produced their awaited
        output at clock ``clock_ns``."""
        with self._lock:
            if topics is not None and self._participants.keys().isdisjoint(topics):
                return []  # none of them takes part (the physics node's rotor-drag feedback, every period)
            held = []
            for topic, participant in self._participants.items():
                if topics is not None and topic not in topics:
                    continue
                awaited = participant.awaited_stamp_ns(clock_ns)
                latest = self._latest_ns.get(topic)
                if awaited is None or awaited <= self._armed_since_ns.get(topic, -math.inf):
                    continue
                if latest is None or latest < awaited - STAMP_TOLERANCE_NS:
                    held.append(Holdup(participant, awaited, latest))
            return held



#: Bytes of a publisher's GID that a signature covers (rmw's GID is 16 bytes, padded to 24 in places).
GID_BYTES = 16


def entry_signature(entry: str, node_name: str, key: bytes, gid: bytes = b"") -> str:
    """HMAC-SHA256 (hex, 128 bits) of ``node_name``, ``entry`` and the announcing publisher's ``gid``
    under ``key``."""
    text = f"{node_name}\n{entry}\n{bytes(gid[:GID_BYTES]).hex()}"
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:32]


def sign_entry(entry: str, node_name: str, key: bytes | None, gid: bytes = b"") -> str:
    """The announcement of ``entry`` by node ``node_name`` (``/ns/name``) through the publisher ``gid``:
    ``ENTRY#SIGNATURE``, or the bare entry without a key."""
    return f"{entry}{SIGNATURE_SEPARATOR}{entry_signature(entry, node_name, key, gid)}" if key else entry


def split_signature(text: str) -> tuple[str, str]:
    """``ENTRY#SIGNATURE`` -> (entry, signature); an unsigned text gives an empty signature."""
    entry, _, signature = text.partition(SIGNATURE_SEPARATOR)
    return entry, signature.strip()


def signature_matches(entry: str, signature: str, node_name: str, key: bytes, gid: bytes = b"") -> bool:
    """True when ``signature`` is ``entry``'s under ``key`` as announced by ``node_name`` through the
    publisher ``gid`` (constant time)."""
    return hmac.compare_digest(signature.encode(), entry_signature(entry, node_name, key, gid).encode())


def parse_key(text: str | None) -> bytes | None:
    """The key in :data:`KEY_VARIABLE`'s text (any non-empty text is a key; hex is what launch writes)."""
    text = (text or "").strip()
    return text.encode() if text else None
