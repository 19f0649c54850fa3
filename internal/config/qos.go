package config

import ()

// qos checks the meters' settings: qos_algorithm, qos_clock, qos_mbr_burst.
func (v *validator) qos(raw *rawConfig) {
	if raw.QoSAlgorithm.Valid() {
		v.cfg.QoSAlgorithm = raw.QoSAlgorithm
	} else {
		v.addf("qos_algorithm: %q is not an algorithm; use %s (the default), %s or %s",
			raw.QoSAlgorithm, AlgoTokenBucket, AlgoSlidingWindow, AlgoFixedWindow)
	}
	if raw.QoSClock.Valid() {
		v.cfg.QoSClock = raw.QoSClock
	} else {
		v.addf("qos_clock: %q is not a clock; use %s (the default), %s or %s", raw.QoSClock, ClockKtime, ClockCoarse, ClockUser)
	}
	if d, ok := v.duration("qos_mbr_burst", raw.QoSMBRBurst, "ms, s",
		`use a duration from 1ms to 10s, e.g. "20ms"`, MinQoSMBRBurst, MaxQoSMBRBurst); ok {
		v.cfg.QoSMBRBurst = d
	}
}
