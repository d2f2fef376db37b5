// The spends-per-day chart (uPlot over the fallback table).
