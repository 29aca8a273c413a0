"""The mathematics, free of run-directory and scenario knowledge: order-statistic intervals, grouped percentiles and
error-rate families (alpha per family and per sequential look).
"""
