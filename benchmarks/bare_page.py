"""The framework's floor for benchmarks.first_draw: one Streamlit page with one chart."""

import plotly.graph_objects as go
import streamlit as st

st.title("Bare page")
st.plotly_chart(go.Figure(go.Scatter(y=[0, 1, 4, 9, 16, 25], mode="lines+markers")))
