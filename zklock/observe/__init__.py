"""What operators look at: lock events, Prometheus metrics, the held locks listed, who
waits for whom, and the timeline picture.
"""
