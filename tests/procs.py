"""What a process the test started is doing, read from /proc."""
import fcntl
import struct
import threading


def blocked_reading(pid):
    """Is the process asleep in a read of a pipe? (its wchan; where the kernel
    hides wchan, asleep at all)"""
    try:
        with open(f"/proc/{pid}/wchan") as w:
            wchan = w.read()
        with open(f"/proc/{pid}/stat") as st:
            state = st.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return "pipe" in wchan or (wchan in ("", "0") and state == "S")


def wait_reading(proc):
    """Until proc has drained its stdin pipe and sleeps reading it."""
    import termios

    for _ in range(6000):
        left = struct.unpack("i", fcntl.ioctl(proc.stdin.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]
        if left == 0 and blocked_reading(proc.pid):
            return
        threading.Event().wait(0.002)
    raise AssertionError("the appender never got to wait for input")
