"""The MAVLink parameter protocol of the autopilot: PARAM_REQUEST_LIST / _READ and PARAM_SET.

Every answer is a PARAM_VALUE carrying the value bytewise as PX4 does (:mod:`aerial_sim.mavlink.parameters`);
a refused PARAM_SET is answered with the value still in force, logged once and explained in a STATUSTEXT.
"""

from __future__ import annotations

from pymavlink.dialects.v20 import common as mav

from aerial_sim.mavlink.parameters import SPECS, ParamRejected, from_wire, param_id_text, to_wire

#: Parameters a client may read but not set (the system id, and what is read once at start).
READ_ONLY = ("MAV_SYS_ID", "MAV_TYPE", "BAT1_N_CELLS", "BAT1_CAPACITY")


class ParameterProtocol:
    """Serves the :class:`~aerial_sim.mavlink.parameters.ParameterTable` of one autopilot."""

    def __init__(self, autopilot):
        self.ap = autopilot

    def handlers(self) -> dict:
        return {"PARAM_REQUEST_LIST": self.on_param_request_list, "PARAM_REQUEST_READ": self.on_param_request_read,
                "PARAM_SET": self.on_param_set}

    def on_param_request_list(self, message) -> None:
        for index in range(len(SPECS)):
            self.ap.send(self.value(index))

    def on_param_request_read(self, message) -> None:
        name = param_id_text(message.param_id)
        index = message.param_index
        try:
            if index < 0 or name:
                index = self.ap.parameters.index(name)
            elif index >= len(SPECS):
                raise ParamRejected(f"no parameter with index {index}")
        except ParamRejected as error:
            self.ap.errors += 1
            self.ap.logger.warning(f"sysid {self.ap.system_id}: PARAM_REQUEST_READ: {error}")
            return
        self.ap.send(self.value(index))

    def on_param_set(self, message) -> None:
        ap = self.ap
        name = param_id_text(message.param_id)
        try:
            index = ap.parameters.index(name)
            value = from_wire(SPECS[index], message.param_value, message.param_type)
            ap.parameters.set(name, value, read_only=READ_ONLY)
        except ParamRejected as error:
            ap.errors += 1
            ap.logger.warning(f"sysid {ap.system_id}: PARAM_SET refused: {error}")
            ap.statustext(mav.MAV_SEVERITY_WARNING, f"param: {error}")
            if name in {s.name for s in SPECS}:
                ap.send(self.value(ap.parameters.index(name)))  # the value still in force
            return
        ap.send(self.value(index))

    def value(self, index: int):
        spec = SPECS[index]
        return mav.MAVLink_param_value_message(spec.name.encode(), to_wire(spec, self.ap.parameters.values[index]),
                                               spec.mav_type, len(SPECS), index)
