/** A time-series chart: uPlot, made once per mount and given new data as it comes. */
import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  color: string;
}

interface ChartProps {
  title: string;
  series: ChartSeries[];
  /** x: seconds since the epoch; then one array per series, the same length. */
  data: [number[], ...number[][]];
  height?: number;
}

export function Chart({ title, series, data, height = 220 }: ChartProps) {
  const container = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);

  useEffect(() => {
    const element = container.current;
    if (!element) return;
    const options: uPlot.Options = {
      title,
      width: element.clientWidth || 600,
      height,
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, fill: `${s.color}22`, width: 2, points: { show: false } }))],
      axes: [{}, { size: 50 }],
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
    };
    plot.current = new uPlot(options, data, element);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: element.clientWidth, height }));
    resize.observe(element);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = undefined;
    };
    // Made once per title and series; new data goes through setData below.
  }, [title, height, series.map((s) => s.label).join()]);

  useEffect(() => plot.current?.setData(data), [data]);

  return <div className="chart" ref={container} data-testid={`chart-${title}`} />;
}
