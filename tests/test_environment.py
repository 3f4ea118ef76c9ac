"""The machine facts a report records (laya_qual.report.environment) that the suite cannot vary:
the CPU model as /proc/cpuinfo names it."""

from __future__ import annotations

import platform

from laya_qual.report.environment import cpu_model


def test_the_cpu_model_is_everything_after_the_first_colon(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Vendor CPU: rev 2 @ 2.0GHz \nflags\t\t: fpu\n"
                       "processor\t: 1\nmodel name\t: Other\n")
    assert cpu_model(cpuinfo) == "Vendor CPU: rev 2 @ 2.0GHz"


def test_without_a_cpuinfo_the_platform_names_the_cpu(tmp_path):
    assert cpu_model(tmp_path / "absent") == (platform.processor() or platform.machine())
