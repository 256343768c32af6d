# %% [markdown]
# # mtbench_position_bias

# %%
print(1)
