"""Lockstep with an autopilot in the loop: one state out and one answer in per simulation step (pure).

In aerial_sim's lockstep (``lockstep:=true``) the physics node steps only once it has a new
``motor_commands`` message for the period it published (doc/lockstep.md); a SITL bridge must so send
each step's state to the autopilot once and publish exactly one command per step, the autopilot's
answer *to that step*, as PX4's lockstep scheduler and Gazebo's ``mavlink_interface`` plugin pair them:

- PX4 (``SimulatorMavlink.cpp``): HIL_SENSOR sets PX4's clock to its ``time_usec``; PX4 runs its
  loop to that time and answers HIL_ACTUATOR_CONTROLS stamped ``time_usec = hrt_absolute_time()``,
  the HIL_SENSOR's time (``flags`` bit 0 set: lockstep). An answer stamped before the step awaited
  answers an earlier, re-sent state and must not release this one. PX4 sends no actuator controls
  until its mixer has published outputs (its first seconds after connecting); Gazebo's plugin so
  waits for actuators only once the first has come, and so does this bridge: until PX4's first
  answer on a connection each step is released with the motors off (the vehicle rests on the ground).
- ArduPilot (``SIM_JSON.cpp``): each servo packet carries a frame count; ArduPilot blocks until the
  state after it comes back and resends the same frame when none does. A new frame is the answer
  that releases a step; a resent frame gets the same state again.

:class:`StepAnswers` keeps that pairing for PX4 (stamps in microseconds of simulation time).
"""

from __future__ import annotations


class StepAnswers:
    """Which states go to the autopilot and which of its answers release a simulation step.

    The physics node re-sends a step's state after 0.5 s without its command (for late joiners);
    such a state goes out again only to an autopilot that connected after it first went out
    (``connection`` counts connections), never twice to the same one, so a slow autopilot is
    never asked the same step twice."""

    def __init__(self):
        self.awaited_us: int | None = None  # the step sent and not answered yet
        self.answered_us = -1  # the last step released
        self.answering = False  # the autopilot has answered on this connection
        self._connection: int | None = None  # the connection the awaited step went out on
        self.released = 0
        self.stale = 0

    def send_state(self, stamp_us: int, connection: int) -> bool:
        """True when the state stamped ``stamp_us`` is to be sent on ``connection``."""
        if connection != self._connection:
            self.answering = False  # a new autopilot: free-running until its first answer
        elif stamp_us == self.awaited_us:
            return False  # the autopilot has it and is still working on it
        if stamp_us <= self.answered_us:
            return False  # re-sent by the physics node after it was released
        self.awaited_us, self._connection = stamp_us, connection
        return True

    def release_unanswered(self) -> bool:
        """Before the autopilot's first answer: True (release the step sent with the motors off)."""
        if self.answering or self.awaited_us is None:
            return False
        self.answered_us, self.awaited_us = self.awaited_us, None
        return True

    def release(self, answer_us: int) -> bool:
        """True when an answer stamped ``answer_us`` answers the step awaited (publish its command);
        False for a stale one (an earlier step's) or one with no step awaited. The first answer on
        a connection answers whichever step is awaited."""
        first = not self.answering
        self.answering = True
        if self.awaited_us is None or (answer_us < self.awaited_us and not first):
            self.stale += 1
            return False
        self.answered_us, self.awaited_us = self.awaited_us, None
        self.released += 1
        return True
