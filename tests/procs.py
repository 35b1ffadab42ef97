"""What a process the test started is doing, read from /proc."""
import fcntl
import struct
import threading


def blocked_reading(pid):
    """Is the process asleep, one of its threads in a read of a pipe? (their
    wchan; where the kernel hides wchan, every thread asleep at all)"""
    import os

    try:
        seen = []
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/wchan") as w:
                wchan = w.read()
            with open(f"/proc/{pid}/task/{task}/stat") as st:
                state = st.read().rsplit(")", 1)[1].split()[0]
            seen.append((wchan, state))
    except OSError:
        return False
    if not seen or any(state != "S" for _, state in seen):
        return False
    return any("pipe" in wchan or wchan in ("", "0") for wchan, _ in seen)


def wait_reading(proc):
    """Until proc has drained its stdin pipe and sleeps reading it."""
    import termios

    for _ in range(6000):
        left = struct.unpack("i", fcntl.ioctl(proc.stdin.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
        if left == 0 and blocked_reading(proc.pid):
            return
        threading.Event().wait(0.002)
    raise AssertionError("the appender never got to wait for input")
