"""Tests of one piece at a time, in this process: pure rules, values, the simulator."""
