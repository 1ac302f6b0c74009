"""External provider executables built on the runtime SDK (devsy.runtime.sdk)."""
