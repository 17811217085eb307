"""One trainer for every task, and the schedules it follows."""
